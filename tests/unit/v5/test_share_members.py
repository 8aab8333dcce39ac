"""Which share consumer of the pool a ``receive`` polls: the free one polled longest ago. No
Kafka: members are stand-ins with the two attributes the choice reads."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import pytest

from adapter.clock import ManualClock
from adapter.v5.share_members import OPEN_AFTER_S, Members, next_to_poll

pytestmark = pytest.mark.timeout(30)


@dataclass
class Polled:
    index: int
    last_polled: float


def test_every_member_is_polled_in_turn_not_the_first_free_one_again_and_again() -> None:
    """A share group assigns each partition to some of its members only (after a coordinator
    moved, seen on three brokers: one partition went to members the pool never polled, and
    its records waited there until a new consumer joined), so every member must be polled."""
    members = [Polled(0, 30.0), Polled(1, 10.0), Polled(2, 20.0)]

    assert next_to_poll(members, lambda m: True) is members[1]
    assert next_to_poll(members, lambda m: m.index != 1) is members[2]
    assert next_to_poll(members, lambda m: False) is None


@dataclass
class StandIn:
    """A member as :class:`Members` sees it."""

    index: int
    band: int
    topics: list[str]
    polling: bool = False
    last_polled: float = 0.0
    holds: bool = False


def members_on(clock: ManualClock, max_consumers: int = 8) -> tuple[Members, list[StandIn]]:
    opened: list[StandIn] = []

    def make(index: int, band: int, topics: list[str]) -> StandIn:
        opened.append(StandIn(index, band, topics))
        return opened[-1]

    pool = Members(
        make=make,  # type: ignore[arg-type]
        max_consumers=max_consumers,
        lock=threading.Lock(),
        clock=clock,
        busy=lambda m: m.polling or m.holds,  # type: ignore[attr-defined]
    )
    return pool, opened


def test_another_member_opens_only_once_every_member_has_been_busy_for_a_moment() -> None:
    """A push consumer asks for its next batch while it acks the last: a member busy for a
    few milliseconds is waited for, not joined by a new one (each join moves the group's
    partitions)."""
    clock = ManualClock(0)
    pool, opened = members_on(clock)
    first = pool.next_to_poll(["T"], set())
    assert first is opened[0]
    first.polling, first.holds = False, True  # type: ignore[union-attr]

    assert pool.next_to_poll(["T"], set()) is None, "busy a moment ago: wait"
    clock.advance(int(OPEN_AFTER_S * 500))
    assert pool.next_to_poll(["T"], set()) is None
    clock.advance(int(OPEN_AFTER_S * 500))
    assert pool.next_to_poll(["T"], set()) is opened[1]
    assert len(opened) == 2


def test_a_member_that_came_free_ends_the_wait_for_a_new_one() -> None:
    clock = ManualClock(0)
    pool, opened = members_on(clock)
    first = pool.next_to_poll(["T"], set())
    first.polling, first.holds = False, True  # type: ignore[union-attr]
    assert pool.next_to_poll(["T"], set()) is None
    clock.advance(int(OPEN_AFTER_S * 1000))
    first.holds = False  # type: ignore[union-attr]

    assert pool.next_to_poll(["T"], set()) is first
    first.polling, first.holds = False, True  # type: ignore[union-attr]
    assert pool.next_to_poll(["T"], set()) is None, "busy again: the wait starts again"
    assert len(opened) == 1


def test_no_member_opens_past_max_consumers_however_long_they_are_busy() -> None:
    clock = ManualClock(0)
    pool, opened = members_on(clock, max_consumers=1)
    first = pool.next_to_poll(["T"], set())
    first.polling, first.holds = False, True  # type: ignore[union-attr]
    pool.next_to_poll(["T"], set())
    clock.advance(60_000)

    assert pool.next_to_poll(["T"], set()) is None
    assert len(opened) == 1
