from __future__ import annotations

import pytest

from adapter.delay import DEFAULT_LEVELS, DelayLevels
from adapter.exceptions import ConfigError

pytestmark = pytest.mark.timeout(30)


def test_the_default_table_has_rocketmqs_eighteen_levels() -> None:
    levels = DelayLevels.parse(DEFAULT_LEVELS)
    assert levels.max_level == 18
    assert levels.delay_ms(1) == 1000
    assert levels.delay_ms(3) == 10_000
    assert levels.delay_ms(5) == 60_000
    assert levels.delay_ms(17) == 3_600_000
    assert levels.delay_ms(18) == 7_200_000


def test_days_are_a_unit_too() -> None:
    assert DelayLevels.parse("1d").delay_ms(1) == 86_400_000


def test_levels_above_the_highest_are_clamped_and_zero_or_less_means_no_delay() -> None:
    levels = DelayLevels.parse("1s 2s 3s")
    assert levels.clamp(7) == 3
    assert levels.clamp(2) == 2
    assert levels.clamp(0) == 0
    assert levels.clamp(-1) == 0


@pytest.mark.parametrize("text", ["", "1s 5x", "10", "s", "0s", "1.5s", "1s,5s"])
def test_a_bad_level_string_is_a_clear_error(text: str) -> None:
    with pytest.raises(ConfigError, match="messageDelayLevel"):
        DelayLevels.parse(text)
