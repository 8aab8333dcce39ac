"""When a delayed message is due: store time plus its partition's delay, and the clock-jump
rule."""

from __future__ import annotations

import pytest

from adapter.delay import DelayLevels
from adapter.hops import HopTable
from adapter.schedule.due import level_due_ms

pytestmark = pytest.mark.timeout(30)

HOPS = HopTable.of(DelayLevels.parse())


def test_due_is_store_time_plus_the_level_delay() -> None:
    now = 1_000_000
    assert level_due_ms(1_000_000, HOPS.delay_ms(0), now) == 1_001_000
    assert level_due_ms(1_000_000, HOPS.delay_ms(2), now) == 1_010_000
    assert level_due_ms(1_000_000, HOPS.delay_ms(17), now) == 1_000_000 + 7_200_000


def test_a_due_time_beyond_now_plus_the_delay_is_due_now() -> None:
    # The broker's clock jumped back: the record looks further away than its level allows.
    assert level_due_ms(49_000, 1000, now_ms=10_000) == 10_000
    assert level_due_ms(10_000, 1000, now_ms=10_000) == 11_000
