"""When a delayed message is due: RocketMQ's ``computeDeliverTimestamp``, across two clocks.

Reproduces ``ScheduleMessageService``: due = the store time of the record in
``SCHEDULE_TOPIC_XXXX`` + the delay of its queue (its level's, or a timer's fine hop's). Here
the store time is Kafka's LogAppendTime, stamped by the partition leader's clock, and "now" is
the forwarder's clock: two hosts, where RocketMQ reads one clock twice. The due time is the
store time + the delay, always, so it is never early by the leader's clock whatever the
forwarder's clock does: one behind (or a leader ahead) makes the message late by the skew.

RocketMQ's ``correctDeliverTimestamp`` ("due now" for a store time in the future) delivered a
level-18 message 2 h early when the leader's clock was 3 ms ahead. An earlier rule here
counted the delay from the read when the store time lay ahead; a chaos run showed its cost: a
forwarder whose clock was set back, then right, delivered what it had read meanwhile up to the
skew early (43 delayed messages, up to 1.7 s of 2 s).

A stamp is trusted up to :data:`TRUSTED_AHEAD_MS` ahead of the forwarder's clock. Further
ahead, a clock is broken (a leader set to next year would hold every message till then), and
the message is due at most that much late: ``min(store, now + TRUSTED_AHEAD_MS) + delay``.

Known gaps: a leader whose clock is behind the forwarder's by S stamps its records S in the
past; they fall due up to S early by the forwarder's clock (on time by the leader's), as a
record read after a forwarder outage falls due at its stamp. The forwarder cannot tell the two
apart; keep the brokers' clocks in sync (NTP), as RocketMQ's brokers need too.
"""

from __future__ import annotations

TRUSTED_AHEAD_MS = 600_000
"""How far ahead of the forwarder's clock a store stamp is believed: ten minutes, far beyond
what NTP allows (1-10 ms) and the chaos run's skews (up to 10 s)."""


def level_due_ms(store_ms: int, delay_ms: int, now_ms: int) -> int:
    """The deliver time of a record stored at ``store_ms`` (the leader's clock) on a partition
    of ``delay_ms``, read at ``now_ms``: store + delay, the store time trusted up to
    :data:`TRUSTED_AHEAD_MS` ahead of now."""
    return min(store_ms, now_ms + TRUSTED_AHEAD_MS) + delay_ms
