"""Timers at any time: a timer hops by the longest hop that does not pass its deliver time, so
it is never early, however late each hop is handled, and takes few hops even 40 days ahead."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapter.delay import DelayLevels
from adapter.hops import HopTable
from adapter.schedule import timer
from adapter.schedule.timer import Deliver, Hop, Wait

pytestmark = pytest.mark.timeout(60)

HOPS = HopTable.of(DelayLevels.parse())
NOW = 1_700_000_000_000
SECOND, MINUTE, DAY = 1000, 60_000, 86_400_000


def run_timer(delay_ms: int, lags_ms: list[int]) -> tuple[int, int]:
    """A timer sent now with ``delay_ms``, through a forwarder that handles each due record
    ``lag`` ms late (the lags taken in turn); when it is delivered, and after how many hops."""
    deliver = NOW + delay_ms
    lags = iter(lags_ms * 1000)
    hop = timer.first_hop(NOW, deliver, HOPS)
    if hop is None:
        return NOW, 0
    due, hops = hop.due_ms, 1
    while True:
        now = timer.hop_due_ms(due, due, hop.partition, HOPS) + next(lags)
        step = timer.next_step(now, deliver, HOPS)
        if isinstance(step, Deliver):
            return now, hops
        if isinstance(step, Wait):
            due = step.until_ms  # waits at the head, then delivered on that turn
            return due + next(lags), hops
        hop, due, hops = step, step.due_ms, hops + 1


@pytest.mark.parametrize(
    ("delay_ms", "most_hops"), [(SECOND, 4), (MINUTE, 12), (3 * DAY, 50), (40 * DAY, 500)]
)
def test_a_timer_is_delivered_on_time_when_the_forwarder_is_prompt(
    delay_ms: int, most_hops: int
) -> None:
    delivered, hops = run_timer(delay_ms, [0])
    assert delivered == NOW + delay_ms
    assert hops <= most_hops


@settings(max_examples=300, deadline=None)
@given(
    delay_ms=st.integers(1, 40 * DAY),
    lags_ms=st.lists(st.integers(0, 300), min_size=1, max_size=8),
)
def test_a_timer_is_never_early_and_late_by_at_most_its_last_lag(
    delay_ms: int, lags_ms: list[int]
) -> None:
    delivered, _ = run_timer(delay_ms, lags_ms)
    assert delivered >= NOW + delay_ms
    assert delivered - (NOW + delay_ms) <= max(lags_ms) + 50


def test_a_timer_due_already_is_sent_as_it_is() -> None:
    assert timer.first_hop(NOW, NOW - 5, HOPS) is None
    assert timer.first_hop(NOW, NOW, HOPS) is None


def test_a_timer_under_the_shortest_hop_ahead_waits_on_the_shortest_hop() -> None:
    assert timer.first_hop(NOW, NOW + 20, HOPS) == Hop(18, NOW + 20)


def test_a_hop_read_after_the_clock_jumped_back_is_due_within_its_own_delay() -> None:
    assert timer.hop_due_ms(NOW + DAY, NOW, 18, HOPS) == NOW + 50


def test_a_deliver_time_over_forty_days_ahead_is_refused_with_the_limit() -> None:
    timer.check_deliver_time(NOW + 40 * DAY, NOW)
    with pytest.raises(ValueError, match="at most 40 days ahead"):
        timer.check_deliver_time(NOW + 40 * DAY + 1, NOW)
