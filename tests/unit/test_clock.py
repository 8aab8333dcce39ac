"""The injected clock: a manual clock moves only when told to, and never back."""

from __future__ import annotations

import pytest

from adapter.clock import SYSTEM_CLOCK, ManualClock

pytestmark = pytest.mark.timeout(30)


def test_a_manual_clock_moves_both_readings_together() -> None:
    clock = ManualClock(now_ms=1_000)
    clock.advance(2_500)
    assert clock.now_ms() == 3_500
    assert clock.monotonic() == 2.5


def test_a_manual_clock_refuses_to_go_back() -> None:
    with pytest.raises(ValueError, match="does not go back"):
        ManualClock().advance(-1)


def test_the_system_clock_reads_epoch_milliseconds() -> None:
    assert SYSTEM_CLOCK.now_ms() > 1_700_000_000_000
