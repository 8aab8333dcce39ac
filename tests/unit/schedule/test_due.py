"""When a delayed message is due: store time plus its partition's delay, whatever the
forwarder's clock says."""

from __future__ import annotations

import pytest

from adapter.delay import DelayLevels
from adapter.hops import HopTable
from adapter.schedule.due import TRUSTED_AHEAD_MS, level_due_ms

pytestmark = pytest.mark.timeout(30)

HOPS = HopTable.of(DelayLevels.parse())


def test_due_is_store_time_plus_the_level_delay() -> None:
    now = 1_000_000
    assert level_due_ms(now, HOPS.delay_ms(0), now) == 1_001_000
    assert level_due_ms(now, HOPS.delay_ms(2), now) == 1_010_000
    assert level_due_ms(now, HOPS.delay_ms(17), now) == 1_000_000 + 7_200_000


SKEWS_MS = [5, 5_000, 300_000]
"""A broker clock ahead of or behind the forwarder's by 5 ms, 5 s and 5 min."""
READ_LAG_MS = 3
"""A caught-up forwarder reads a record a few ms after the leader appended it."""


@pytest.mark.parametrize("skew", SKEWS_MS)
@pytest.mark.parametrize("partition", [0, 17])
def test_a_forwarder_clock_behind_that_is_set_right_later_never_makes_a_record_early(
    skew: int, partition: int
) -> None:
    # The forwarder's clock is `skew` ms behind the leader's (the record looks stored in its
    # future) when it reads the record, and is set right before the record is due: by the
    # leader's clock, which is the right one, the record is due one delay after it was stored.
    delay, appended = HOPS.delay_ms(partition), 1_700_000_000_000
    due = level_due_ms(appended, delay, appended - skew + READ_LAG_MS)
    assert due == appended + delay, "never early once the forwarder's clock is right"
    assert due - (appended - skew + READ_LAG_MS) == delay + skew - READ_LAG_MS, (
        "late by the skew while the forwarder's clock stays behind"
    )


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
    assert level_due_ms(1_000_000, 1000, 4_600_000) == 1_001_000


@pytest.mark.parametrize("ahead", [TRUSTED_AHEAD_MS + 1, 86_400_000 * 365, 2**63 - 1])
def test_a_stamp_absurdly_far_ahead_holds_a_record_at_most_the_trusted_skew_late(
    ahead: int,
) -> None:
    # A leader whose clock is set to next year (or a forged stamp) must not hold a delayed
    # message till then: beyond ten minutes ahead the stamp is not believed.
    now = 1_700_000_000_000
    due = level_due_ms(now + ahead, 1000, now)
    assert due == now + TRUSTED_AHEAD_MS + 1000
