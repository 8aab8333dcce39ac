"""What the forwarder does when a real topic refuses a delivery: retry, or park.

RocketMQ's ``ScheduleMessageService`` writes a due message into its own commit log whatever
its topic, and retries a failed write forever, holding its level back. On Kafka a real topic
can refuse a record for good (too large, denied by an ACL) or for a while (a leader moving, a
topic not created yet). A level keeps its order, so the forwarder retries the head of a level
with exponential back-off (tenacity's wait strategy) while the other levels go on; a record no
retry can cure is parked in ``RMQ_SYS_POISON_TOPIC`` with its reason. A record whose topic does
not exist is retried for a grace (an operator may be creating the topic; auto-creation is off
on a production cluster), then parked with reason ``missing topic``: a deleted topic cannot
hold every later message of its level back forever, and nothing is dropped.

Known gaps: the grace is counted from the first refusal this worker saw; a worker that takes
the level over counts again. The record is parked at its first retry past the grace, so up to
one back-off (at most 30 s) later.
"""

from __future__ import annotations

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


class MissingTopics:
    """Since when the head record of each level has waited for its real topic to exist."""

    def __init__(self, grace_ms: int) -> None:
        self.grace_ms = grace_ms
        self._since: dict[tuple[int, int], int] = {}

    def park_reason(self, partition: int, offset: int, topic: str, now_ms: int) -> str | None:
        """The record at ``partition``@``offset`` was refused because ``topic`` does not
        exist: None while it is within the grace (retry later), else why it is parked."""
        since = self._since.setdefault((partition, offset), now_ms)
        waited_ms = now_ms - since
        if waited_ms < self.grace_ms:
            return None
        del self._since[(partition, offset)]
        return f"missing topic: {topic!r} did not exist for {waited_ms / 1000:.1f} s"

    def moved_on(self, partition: int, position: int | None = None) -> None:
        """The level of ``partition`` committed up to ``position`` (exclusive), or left this
        worker (None): forget the waits of the records it is past."""
        for key in [
            key
            for key in self._since
            if key[0] == partition and (position is None or key[1] < position)
        ]:
            del self._since[key]
