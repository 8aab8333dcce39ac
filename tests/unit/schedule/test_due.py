"""When a delayed message is due: store time plus the level's delay, and the clock-jump rule."""

from __future__ import annotations

from adapter.delay import DelayLevels
from adapter.schedule.due import corrected_due_ms, due_ms

LEVELS = DelayLevels.parse()


def test_due_is_store_time_plus_the_level_delay() -> None:
    assert due_ms(1_000_000, 1, LEVELS) == 1_001_000
    assert due_ms(1_000_000, 3, LEVELS) == 1_010_000
    assert due_ms(1_000_000, 18, LEVELS) == 1_000_000 + 7_200_000


def test_a_level_above_the_table_uses_the_highest_delay() -> None:
    assert due_ms(0, 99, LEVELS) == 7_200_000


def test_a_due_time_beyond_now_plus_the_delay_is_due_now() -> None:
    # The broker's clock jumped back: the record looks further away than its level allows.
    assert corrected_due_ms(due=50_000, now_ms=10_000, level=1, levels=LEVELS) == 10_000
    assert corrected_due_ms(due=11_000, now_ms=10_000, level=1, levels=LEVELS) == 11_000
