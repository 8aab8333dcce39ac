"""The hop table: the delay levels keep partitions 0..17, and a binary ladder of fine hops under
the shortest level follows them."""

from __future__ import annotations

import pytest

from adapter.delay import DelayLevels
from adapter.hops import HopTable

pytestmark = pytest.mark.timeout(30)

DEFAULT = HopTable.of(DelayLevels.parse())


def test_the_default_table_adds_five_fine_hops_after_the_eighteen_levels() -> None:
    assert DEFAULT.fine_ms == (50, 100, 200, 400, 800)
    assert DEFAULT.partitions == 23
    assert [DEFAULT.delay_ms(p) for p in (0, 17, 18, 22)] == [1000, 7_200_000, 50, 800]
    assert [DEFAULT.label(p) for p in (0, 17, 18)] == ["1", "18", "fine-50ms"]


def test_the_hop_chosen_is_the_longest_that_does_not_pass_the_time_left() -> None:
    assert DEFAULT.partition_for(7_200_000 * 5) == 17, "2 h, the longest level"
    assert DEFAULT.partition_for(90_000) == 4, "1 min"
    assert DEFAULT.partition_for(999) == 22, "800 ms"
    assert DEFAULT.partition_for(50) == 18
    assert DEFAULT.partition_for(49) is None


def test_a_table_with_a_longer_shortest_level_gets_a_longer_ladder() -> None:
    table = HopTable.of(DelayLevels.parse("5s 1m"))
    assert table.fine_ms == (50, 100, 200, 400, 800, 1600, 3200)
    assert table.partitions == 9


def test_a_partition_outside_the_table_is_refused() -> None:
    with pytest.raises(ValueError, match="outside 0..22"):
        DEFAULT.delay_ms(23)
