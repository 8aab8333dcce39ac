"""When a delayed message is due: store time plus its partition's delay, counted from the read
when the store time lies ahead of the forwarder's clock."""

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


def test_a_store_time_ahead_of_now_counts_the_delay_from_now() -> None:
    # The broker's clock runs ahead (or the forwarder's jumped back): the record looks stored
    # in the future. It is due one delay from now, never at once and never later.
    assert level_due_ms(49_000, 1000, now_ms=10_000) == 11_000
    assert level_due_ms(10_000, 1000, now_ms=10_000) == 11_000


SKEWS_MS = [5, 5_000, 300_000]
"""A broker clock ahead of or behind the forwarder's by 5 ms, 5 s and 5 min."""
READ_LAG_MS = 3
"""A caught-up forwarder reads a record a few ms after the leader appended it."""


@pytest.mark.parametrize("skew", SKEWS_MS)
@pytest.mark.parametrize("partition", [0, 17])
def test_a_broker_clock_ahead_never_makes_a_record_due_before_its_delay_from_its_read(
    skew: int, partition: int
) -> None:
    # The leader stamps the record `skew` ms ahead of the forwarder's clock, which reads it
    # a few ms after the append: the record looks stored in the forwarder's future.
    delay, appended = HOPS.delay_ms(partition), 1_700_000_000_000
    read = appended + READ_LAG_MS
    due = level_due_ms(appended + skew, delay, read)
    assert due == read + delay, "due one delay after it was read, not at once"


@pytest.mark.parametrize("skew", SKEWS_MS)
@pytest.mark.parametrize("partition", [0, 17])
def test_a_broker_clock_behind_makes_a_record_due_at_most_the_skew_early(
    skew: int, partition: int
) -> None:
    # The leader stamps the record `skew` ms in the forwarder's past: the delay is counted
    # from that stamp (the broker's own clock), so it falls due up to `skew` early by the
    # forwarder's clock, never earlier, and never later than a delay after it was read.
    delay, appended = HOPS.delay_ms(partition), 1_700_000_000_000
    read = appended + READ_LAG_MS
    due = level_due_ms(appended - skew, delay, read)
    assert due == appended - skew + delay
    assert appended + delay - skew <= due <= read + delay


def test_a_record_read_long_after_it_was_stored_is_due_at_its_store_time_plus_the_delay() -> None:
    # No forwarder ran for an hour: what fell due meanwhile is due at once, in order.
    assert level_due_ms(1_000_000, 1000, now_ms=1_000_000 + 3_600_000) == 1_001_000
