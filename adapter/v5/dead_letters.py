"""The 5.x ``SimpleConsumer``'s dead letters: records past their attempts, to ``%DLQ%<group>``.

Reproduces the 5.x proxy's forward to the dead-letter queue: a message popped past its max
attempts goes to ``%DLQ%<group>`` instead of the application. A record is copied there with
the 2.0 consumer's send-back (:class:`~adapter.consumer.send_back.SendBack`: the same topic
and record, every header as its bytes, ``rmq.dlq_reason`` saying why) and then ACCEPTed. A
member holding one polls no more until it is moved (librdkafka refuses a poll while a record
is unacknowledged); one Kafka refuses is tried again by the pool's reaper until its lock ends.

Not thread-safe on its own: the pool holds its lock around every call but :meth:`move`,
which takes it itself around the book-keeping and does the Kafka calls outside it.

Known gaps: a copy Kafka refuses until the record's lock ends is given up (logged as an
error); Kafka then hands the record out again, and archives it past the group's delivery
count limit if it is refused until then.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException

from adapter.clock import Clock
from adapter.consumer.send_back import SendBack
from adapter.exceptions import AdapterError
from adapter.v5.exception import IllegalStateException
from adapter.v5.fetched import Fetched
from adapter.v5.share_group import ACCEPT, Member

__all__ = ["DeadLetter", "DeadLetters"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DeadLetter:
    name: str
    """The record's stable name (the invisibility book forgets it once moved)."""
    fetched: Fetched
    lock_until: float
    reason: str


class DeadLetters:
    """The records each member of a pool holds for the dead-letter topic."""

    def __init__(
        self,
        *,
        group: str,
        send_back: SendBack,
        max_attempts: int,
        limit: int,
        clock: Clock,
        timeout_s: float,
        lock: threading.Lock,
    ) -> None:
        self._group = group
        self._send_back = send_back
        self._max_attempts = max_attempts
        self._limit = limit
        self._clock = clock
        self._timeout_s = timeout_s
        self._lock = lock
        self._dead: dict[Any, list[DeadLetter]] = {}

    def why(self, fetched: Fetched, *, seen: bool) -> str:
        """Why ``fetched`` goes to the dead-letter topic (``seen``: this delivery included)."""
        shown = fetched.attempt if seen else fetched.attempt - 1
        if shown >= self._max_attempts:
            return f"delivered {shown} times without an ack (max attempts {self._max_attempts})"
        return (
            f"delivered {shown} times without an ack; Kafka fetched it {fetched.kafka_count} "
            f"times, and the group's delivery count limit ({self._limit}) leaves no more"
        )

    def add(self, member: Any, letters: list[DeadLetter]) -> None:
        if letters:
            self._dead.setdefault(member, []).extend(letters)

    def holds(self, member: Any) -> bool:
        return bool(self._dead.get(member))

    def members(self) -> list[Any]:
        """The members holding a record for the dead-letter topic."""
        return [member for member, left in self._dead.items() if left]

    def move(self, member: Member, forget: Callable[[str], None]) -> None:
        """Copy the member's records to ``%DLQ%<group>``, then accept them; one Kafka refuses
        stays held and is tried again at the next call, until its lock ends. The caller has
        marked the member as polling, so no one else works on it; ``forget`` is told the name
        of each record settled (under the lock)."""
        with self._lock:
            dead = list(self._dead.get(member.index, []))
        done = []
        for letter in dead:
            fetched = letter.fetched
            try:
                self._send_back.dead_letter(fetched.received, letter.reason)
            except (AdapterError, KafkaException, IllegalStateException) as exc:
                if self._clock.monotonic() < letter.lock_until:
                    log.error(
                        "group %s: could not move %s to the dead-letter topic (%s); trying "
                        "again", self._group, fetched.received.id, exc,
                    )  # fmt: skip
                    continue
                log.error(
                    "group %s: could not move %s to the dead-letter topic before Kafka's lock "
                    "on it ended (%s); Kafka delivers it again, or archives it past the "
                    "group's delivery count limit", self._group, fetched.received.id, exc,
                )  # fmt: skip
            else:
                member.settle([(fetched.record, ACCEPT)], self._timeout_s)
            done.append(letter)
        with self._lock:
            left = [d for d in self._dead.pop(member.index, []) if d not in done]
            if left:
                self._dead[member.index] = left
            for letter in done:
                forget(letter.name)
