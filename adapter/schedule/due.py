"""When a delayed message is due: RocketMQ's ``computeDeliverTimestamp``, across two clocks.

Reproduces ``ScheduleMessageService``: due = the store time of the record in
``SCHEDULE_TOPIC_XXXX`` + the delay of its queue (its level's, or a timer's fine hop's), with
``correctDeliverTimestamp`` for a store time that lies in the future. Here the store time is
Kafka's LogAppendTime, stamped by the partition leader's clock, and "now" is the forwarder's
clock: two hosts, where RocketMQ reads one clock twice. So a store time ahead of the
forwarder's clock (the leader's clock runs ahead, or the forwarder's jumped back) counts from
the moment the forwarder read the record: the due time lies between store + delay and read +
delay, never at once (RocketMQ's rule, "due now", delivered a level-18 message 2 h early when
the leader's clock was 3 ms ahead).

Known gaps: a leader whose clock is behind the forwarder's by S stamps its records S in the
past; they fall due up to S early by the forwarder's clock (on time by the leader's), as a
record read after a forwarder outage falls due at its stamp. The forwarder cannot tell the two
apart; keep the brokers' clocks in sync (NTP), as RocketMQ's brokers need too.
"""

from __future__ import annotations


def level_due_ms(store_ms: int, delay_ms: int, now_ms: int) -> int:
    """The deliver time of a record stored at ``store_ms`` on a partition of ``delay_ms``, read
    at ``now_ms``: ``store_ms + delay_ms``, or ``now_ms + delay_ms`` when the store time lies
    ahead of now."""
    return min(store_ms, now_ms) + delay_ms
