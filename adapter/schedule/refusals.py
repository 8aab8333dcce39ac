"""What the forwarder does when a real topic refuses a delivery: retry, or park.

RocketMQ's ``ScheduleMessageService`` writes a due message into its own commit log whatever
its topic, and retries a failed write forever, holding its level back. On Kafka a real topic
can refuse a record for good (too large, denied by an ACL) or for a while (a leader moving, a
topic not created yet). A level keeps its order, so the forwarder retries the head of a level
with exponential back-off (tenacity's wait strategy) while the other levels go on; a record no
retry can cure is parked in ``RMQ_SYS_POISON_TOPIC`` with its reason. A record whose topic does
not exist does not hold its level: it is set aside (:mod:`adapter.schedule.aside`).

Known gaps: a topic that refuses for a while (no leader, too few in-sync replicas) holds its
level back meanwhile, in order.
"""

from __future__ import annotations

from collections.abc import Iterable

import tenacity
from confluent_kafka import KafkaError

PERMANENT = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError.INVALID_RECORD,
        KafkaError.RECORD_LIST_TOO_LARGE,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.TOPIC_EXCEPTION,
    }
)
"""Delivery errors that no retry can cure: the record is parked instead."""
PURGED = frozenset({KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT})
"""Records purged by an abort, not refused by the topic."""
_BACKOFF = tenacity.wait_exponential(multiplier=0.1, max=30) + tenacity.wait_random(0, 0.1)


def backoff_s(attempt: int) -> float:
    """Seconds to wait before retry number ``attempt`` (1-based) of a refused delivery."""
    state = tenacity.RetryCallState(None, None, (), {})  # type: ignore[arg-type]
    state.attempt_number = attempt
    return float(_BACKOFF(state))


class Refusals:
    """What the refusals of one worker left: per level, how many retries in a row, and the
    records no retry cures (``doomed``, with their reasons) until their parking commits."""

    def __init__(self) -> None:
        self.doomed: dict[tuple[int, int], str] = {}
        self._attempts: dict[int, int] = {}

    def doom(self, partition: int, offset: int, reason: str) -> None:
        self.doomed[(partition, offset)] = reason

    def sort(self, failures: Iterable[tuple[int, int, KafkaError]]) -> set[int]:
        """Doom the records of ``failures`` (partition, offset, error) that no retry cures;
        return the levels refused for a while. Records purged by an abort were not refused."""
        refused: set[int] = set()
        for partition, offset, error in failures:
            if error.code() in PURGED:
                continue
            if error.code() in PERMANENT:
                self.doom(partition, offset, f"refused: {error.str()}")
            else:
                refused.add(partition)
        return refused

    def retry(self, partition: int) -> tuple[int, float]:
        """The level was refused once more: the attempt's number and seconds to wait."""
        attempt = self._attempts.get(partition, 0) + 1
        self._attempts[partition] = attempt
        return attempt, backoff_s(attempt)

    def committed(self, records: Iterable[tuple[int, int]], levels: Iterable[int]) -> None:
        """``records`` are consumed (parked or delivered) and ``levels`` moved on."""
        for key in records:
            self.doomed.pop(key, None)
        for partition in levels:
            self._attempts.pop(partition, None)

    def forget(self, partition: int) -> None:
        """The level left this worker: its next owner reads and judges its records again."""
        self._attempts.pop(partition, None)
        for key in [key for key in self.doomed if key[0] == partition]:
            del self.doomed[key]
