"""When a delayed message is due: RocketMQ's ``computeDeliverTimestamp`` and its correction.

Reproduces ``ScheduleMessageService``: due = the broker's store time of the record in
``SCHEDULE_TOPIC_XXXX`` + the level's delay, and ``correctDeliverTimestamp``: a due time further
away than now + the level's delay (the clock jumped back, or the level table changed) is due now.
Here the store time is Kafka's LogAppendTime of the SCHEDULE record, stamped by the broker.

Known gaps: none; both rules are exact.
"""

from __future__ import annotations

from adapter.delay import DelayLevels


def due_ms(store_ms: int, level: int, levels: DelayLevels) -> int:
    """The deliver time of a record stored at ``store_ms`` on ``level`` (clamped to the table)."""
    return store_ms + levels.delay_ms(levels.clamp(level) or 1)


def corrected_due_ms(due: int, now_ms: int, level: int, levels: DelayLevels) -> int:
    """``due``, or ``now_ms`` when ``due`` lies beyond now + the level's delay."""
    if due > now_ms + levels.delay_ms(levels.clamp(level) or 1):
        return now_ms
    return due
