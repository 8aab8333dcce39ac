"""Timer messages at any time: where a timer goes next, and when it is due (pure).

Reproduces RocketMQ 5's timer messages (``delivery_timestamp``, the ``TIMER_DELIVER_MS``
property): a message is delivered at or after its deliver time, never before, up to
:data:`MAX_TIMER_MS` ahead (RocketMQ's broker allows 3 days, ``timerMaxDelaySec``). Instead of a
timing wheel, a timer hops through the partitions of ``SCHEDULE_TOPIC_XXXX`` (see
:mod:`adapter.hops`): each hop is one record, and the forwarder moves it to its next
hop, or delivers it, in one Kafka transaction, exactly once. Retention longer than the longest
level is never needed: no record waits longer than one hop.

A hop record carries the deliver time and the time its hop ends (headers :data:`DELIVER_HEADER`
and :data:`HOP_DUE_HEADER`, on the writer's clock); the broker's clock plays no part.

Known gaps: the last part of a wait, under :data:`~adapter.hops.FINE_HOP_MS`, is spent
at the head of its partition, where it can hold back the records behind it by as much. Clocks of
producers and forwarders must agree: a timer is never early by the forwarder's clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from adapter.hops import HopTable

MAX_TIMER_MS = 40 * 86_400_000
"""How far ahead a deliver time may lie: 40 days."""
DELIVER_HEADER = "TIMER_DELIVER_MS"
"""The deliver time, epoch ms (the property's name in RocketMQ 5)."""
HOP_DUE_HEADER = "rmq.hop_due"
"""When the current hop ends, epoch ms, on the clock of the one who wrote the hop."""


@dataclass(frozen=True, slots=True)
class Deliver:
    """The deliver time has come."""


@dataclass(frozen=True, slots=True)
class Wait:
    """Less than the shortest hop is left: wait at the head until ``until_ms``."""

    until_ms: int


@dataclass(frozen=True, slots=True)
class Hop:
    """Write the timer again to ``partition``; the hop ends at ``due_ms``."""

    partition: int
    due_ms: int


Step = Deliver | Wait | Hop


def next_step(now_ms: int, deliver_ms: int, hops: HopTable) -> Step:
    """What to do with a timer due at ``deliver_ms`` now: the longest hop that does not pass it."""
    remaining = deliver_ms - now_ms
    if remaining <= 0:
        return Deliver()
    partition = hops.partition_for(remaining)
    if partition is None:
        return Wait(deliver_ms)
    return Hop(partition, now_ms + hops.delay_ms(partition))


def first_hop(now_ms: int, deliver_ms: int, hops: HopTable) -> Hop | None:
    """Where a producer parks a new timer; None when it is due already (send it as it is).
    Under the shortest hop ahead, it waits out the rest on the shortest hop's partition."""
    step = next_step(now_ms, deliver_ms, hops)
    if isinstance(step, Deliver):
        return None
    if isinstance(step, Wait):
        return Hop(hops.shortest_partition, deliver_ms)
    return step


def hop_due_ms(hop_due: int, now_ms: int, partition: int, hops: HopTable) -> int:
    """When a hop record read now is due: its hop's end, but never later than now + the hop's
    delay (the clock jumped back, or the writer's clock ran ahead; RocketMQ's
    ``correctDeliverTimestamp``)."""
    return min(hop_due, now_ms + hops.delay_ms(partition))


def check_deliver_time(deliver_ms: int, now_ms: int) -> None:
    """``ValueError`` for a deliver time more than :data:`MAX_TIMER_MS` ahead."""
    if deliver_ms - now_ms > MAX_TIMER_MS:
        days = (deliver_ms - now_ms) / 86_400_000
        raise ValueError(
            f"delivery_timestamp {deliver_ms} is {days:.1f} days ahead; timer messages may be "
            f"at most {MAX_TIMER_MS // 86_400_000} days ahead"
        )
