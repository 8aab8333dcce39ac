from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapter.consumer.offsets import PartitionOffsets

pytestmark = pytest.mark.timeout(60)


def test_nothing_tracked_means_nothing_to_commit() -> None:
    offsets = PartitionOffsets()
    assert offsets.position is None
    assert offsets.take_commit() is None


def test_the_position_stops_at_the_first_unfinished_offset() -> None:
    offsets = PartitionOffsets()
    for o in range(5):
        offsets.track(o)
    offsets.ack(0)
    offsets.ack(2)
    offsets.ack(3)
    assert offsets.position == 1
    offsets.ack(1)
    assert offsets.position == 4
    offsets.ack(4)
    assert offsets.position == 5
    assert offsets.in_flight == 0


def test_gaps_left_by_transaction_markers_do_not_stall_the_position() -> None:
    offsets = PartitionOffsets()
    for o in (10, 11, 13, 17):
        offsets.track(o)
    for o in (17, 13, 11, 10):
        offsets.ack(o)
    assert offsets.position == 18


def test_a_confirmed_position_is_not_handed_out_for_commit_again() -> None:
    offsets = PartitionOffsets()
    offsets.track(0)
    offsets.ack(0)
    assert offsets.take_commit() == 1
    offsets.committed(1)
    assert offsets.take_commit() is None
    offsets.track(1)
    assert offsets.take_commit() is None
    offsets.ack(1)
    assert offsets.take_commit() == 2


@given(st.data(), st.integers(min_value=1, max_value=60))
def test_the_position_is_always_the_smallest_unacknowledged_offset(
    data: st.DataObject, n: int
) -> None:
    gaps = data.draw(st.lists(st.integers(min_value=1, max_value=3), min_size=n, max_size=n))
    tracked, o = [], 0
    for gap in gaps:
        o += gap
        tracked.append(o)
    acks = data.draw(st.permutations(tracked))
    how_many = data.draw(st.integers(min_value=0, max_value=n))
    offsets = PartitionOffsets()
    for t in tracked:
        offsets.track(t)
    for a in acks[:how_many]:
        offsets.ack(a)
    unfinished = sorted(set(tracked) - set(acks[:how_many]))
    expected = unfinished[0] if unfinished else tracked[-1] + 1
    assert offsets.position == expected
    assert offsets.in_flight >= len(unfinished)


def test_a_position_whose_commit_was_not_confirmed_is_taken_again() -> None:
    offsets = PartitionOffsets()
    for o in range(3):
        offsets.track(o)
        offsets.ack(o)

    assert offsets.take_commit() == 3
    assert offsets.take_commit() == 3, "the asynchronous commit failed, or is not answered yet"
    offsets.committed(3)
    assert offsets.take_commit() is None


def test_an_offset_going_backwards_restarts_tracking_there() -> None:
    offsets = PartitionOffsets()
    for o in (5, 6):
        offsets.track(o)
    offsets.ack(5)

    assert offsets.track(3) is True, "it says it went back"
    assert offsets.position == 3
    for o in (4, 5, 6):
        assert offsets.track(o) is False
    for o in (3, 4, 5, 6):
        offsets.ack(o)
    assert offsets.position == 7
