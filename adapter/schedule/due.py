"""When a delayed message is due: RocketMQ's ``computeDeliverTimestamp`` and its correction.

Reproduces ``ScheduleMessageService``: due = the broker's store time of the record in
``SCHEDULE_TOPIC_XXXX`` + the delay of its queue (its level's, or a timer's fine hop's), and
``correctDeliverTimestamp``: a due time further away than now + that delay (the clock jumped
back, or the level table changed) is due now. Here the store time is Kafka's LogAppendTime of
the SCHEDULE record, stamped by the broker.

Known gaps: none; both rules are exact.
"""

from __future__ import annotations


def level_due_ms(store_ms: int, delay_ms: int, now_ms: int) -> int:
    """The deliver time of a record stored at ``store_ms`` on a partition of ``delay_ms``, read
    at ``now_ms``: ``store_ms + delay_ms``, or ``now_ms`` when that lies beyond now + the delay."""
    due = store_ms + delay_ms
    return now_ms if due > now_ms + delay_ms else due
