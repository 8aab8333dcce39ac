"""Read a group's dead letters, and resend them exactly once, through Kafka.

Plays the part of rocketmq-dashboard's DLQ page (browse, resend, export) on ``%DLQ%<group>``.
Reading is read_committed, from the window's first offset (``offsets_for_times``) to the end.

A resend must survive being repeated or cut short: an operator runs it again after a timeout
or a ``^C``, and RocketMQ's dashboard has reported failed resends as done. So each copy goes to
``%RETRY%<group>`` in one Kafka transaction with a marker record on the compacted topic
``RMQ_SYS_DLQ_RESENT``, keyed by the dead letter's place; a dead letter whose marker is there
is reported as resent before and skipped. The transactional id is one per group, so a second
resend of the same group started meanwhile fences the first (whose open transaction aborts)
and reads the markers only after that: two resends never both copy one dead letter. Each
message's outcome is reported as it happens; a copy is "resent" only once its transaction
committed.

Known gaps: markers are kept for ever (a compacted topic, one small record per dead letter
resent).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException, TopicPartition

from adapter import naming
from adapter.clock import SYSTEM_CLOCK, Clock
from adapter.exceptions import AdapterError
from adapter.kafka import clients, topics
from adapter.kafka.reading import log_ends, read_to_end
from adapter.ops.dead_letter_records import DeadLetter, marker_key, resent_copy

log = logging.getLogger(__name__)

RESENT_TOPIC = "RMQ_SYS_DLQ_RESENT"
_RESENT = naming.kafka_topic(RESENT_TOPIC)


@dataclass(frozen=True, slots=True)
class Outcome:
    letter: DeadLetter
    resent: bool
    """True: this run copied it; False: a marker said an earlier run had."""


def _letter(record: Any) -> DeadLetter:
    _, timestamp = record.timestamp()
    return DeadLetter(
        record.partition(),
        record.offset(),
        int(timestamp),
        record.key(),
        record.value() or b"",
        tuple(record.headers() or ()),
    )


class DeadLetters:
    """One group's ``%DLQ%<group>``; every Kafka call waits at most ``timeout_s``."""

    def __init__(
        self,
        conf: Mapping[str, Any],
        group: str,
        timeout_s: float,
        clock: Clock = SYSTEM_CLOCK,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._conf = dict(conf)
        self._group = naming.validate_group(group)
        self._timeout_s = timeout_s
        self._clock = clock
        self._sleep = sleep
        self.dlq_topic = naming.dlq_topic(group)
        self._kafka_dlq = naming.kafka_topic(self.dlq_topic)
        metadata = clients.reach(self._conf, timeout_s).topics.get(self._kafka_dlq)
        if metadata is None or metadata.error is not None:
            raise AdapterError(
                f"group {group!r} has no dead letters ({self.dlq_topic} does not exist)"
            )
        self._partitions = sorted(metadata.partitions)

    def read(self, begin_ms: int | None = None) -> Iterator[DeadLetter]:
        """The dead letters stored at or after ``begin_ms`` (all when ``None``), in order."""
        starts = {p: -2 for p in self._partitions}
        if begin_ms is not None:
            reader = clients.consumer({**self._conf, "group.id": "rmq-adapter-dlq"})
            try:
                asked = [TopicPartition(self._kafka_dlq, p, begin_ms) for p in self._partitions]
                found = reader.offsets_for_times(asked, timeout=self._timeout_s)
            finally:
                reader.close()
            ends = log_ends(self._conf, self._kafka_dlq, self._partitions, self._timeout_s)
            starts = {
                tp.partition: tp.offset if tp.offset >= 0 else ends[tp.partition] for tp in found
            }
        for record in read_to_end(self._conf, self._kafka_dlq, starts, self._timeout_s):
            yield _letter(record)

    def resend(
        self,
        letters: Sequence[DeadLetter],
        *,
        rate_per_s: float | None = None,
        on_outcome: Callable[[Outcome], None] = lambda _o: None,
    ) -> list[Outcome]:
        """Copy each of ``letters`` to ``%RETRY%<group>`` once, with its marker, one
        transaction each; those resent before are skipped. Raises on the first failure (what
        committed before it stays resent; run again to go on)."""
        retry = naming.kafka_topic(naming.retry_topic(self._group))
        admin = clients.admin(self._conf)
        topics.ensure_single_queue_topic(admin, retry, self._timeout_s)
        topics.ensure_single_queue_topic(admin, _RESENT, self._timeout_s, topics.COMPACTED)
        producer = clients.producer(
            {
                **self._conf,
                "transactional.id": f"rmq-adapter-dlq-resend-{self._group}",
                "enable.idempotence": True,
                "linger.ms": 0,
            }
        )
        try:
            producer.init_transactions(self._timeout_s)  # fences an earlier resend of the group
            done = self._resent_before()
            outcomes: list[Outcome] = []
            next_at = self._clock.monotonic()
            for letter in letters:
                key = marker_key(self._group, letter)
                if key in done:
                    outcome = Outcome(letter, resent=False)
                else:
                    if rate_per_s:
                        self._sleep(max(next_at - self._clock.monotonic(), 0.0))
                        next_at = max(next_at, self._clock.monotonic()) + 1.0 / rate_per_s
                    producer.begin_transaction()
                    producer.produce(
                        retry,
                        letter.body,
                        key=letter.key,
                        headers=resent_copy(letter, self.dlq_topic),
                    )
                    producer.produce(_RESENT, str(letter.msg_id).encode(), key=key)
                    producer.commit_transaction(self._timeout_s)
                    done.add(key)
                    outcome = Outcome(letter, resent=True)
                on_outcome(outcome)
                outcomes.append(outcome)
            return outcomes
        except KafkaException as exc:
            error = exc.args[0]
            raise AdapterError(
                f"resend of {self.dlq_topic} stopped: {error.str()} (the messages reported "
                "resent are; run the same command again to go on: none is copied twice)"
            ) from exc
        finally:
            producer.flush(1.0)

    def _resent_before(self) -> set[bytes]:
        prefix = f"{self._group}|".encode()
        return {
            key
            for record in read_to_end(self._conf, _RESENT, {0: -2}, self._timeout_s)
            if (key := record.key()) is not None and key.startswith(prefix)
        }
