"""Priority messages' pure mapping onto Kafka: a priority's band, the bands' Kafka names, and
which bands a consumer may fetch while a higher one holds records."""

from __future__ import annotations

import pytest

from adapter import naming
from adapter.exceptions import InvalidNameError
from adapter.priorities import BandGate, BandTurns, band_for

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize(
    ("priority", "bands", "band"),
    [
        (None, {1, 2}, 0),
        (0, {1, 2}, 0),
        (1, {1, 2}, 1),
        (9, {1, 2}, 2),  # above the highest band: the highest
        (5, {1, 3, 9}, 3),  # between bands: the one below
        (4, set(), 0),  # a plain topic: itself
    ],
)
def test_a_priority_goes_to_the_highest_band_not_above_it(
    priority: int | None, bands: set[int], band: int
) -> None:
    assert band_for(priority, bands) == band


def test_band_0_is_the_topic_itself_and_the_others_are_kafka_names_no_user_topic_has() -> None:
    assert naming.priority_topic("Orders", 0) == "Orders"
    assert naming.priority_topic("Orders", 2) == "Orders.priority-2"
    assert naming.priority_topic("%RETRY%g", 25) == ".25RETRY.25g.priority-25"
    assert naming.decode("Orders.priority-25") == "Orders.priority-25"
    with pytest.raises(InvalidNameError):
        naming.priority_topic("Orders", -1)


def test_a_band_s_record_belongs_to_its_topic() -> None:
    assert naming.topic_of("Orders.priority-2") == "Orders"
    assert naming.topic_of(".25RETRY.25g.priority-25") == "%RETRY%g"
    assert naming.topic_of("Orders") == "Orders"
    assert naming.topic_of("Orders.priority-0") == "Orders.priority-0"  # band 0 is Orders


def test_the_bands_of_a_topic_are_found_among_kafka_s_topics() -> None:
    names = ["Orders", "Orders.priority-1", "Orders.priority-3", "Orders.priority-03",
             "Orders.priority-0", "Orders.priority-x", "Orders2.priority-2", "Other"]  # fmt: skip
    assert naming.priority_bands("Orders", names) == {
        1: "Orders.priority-1",
        3: "Orders.priority-3",
    }
    assert naming.priority_bands("Other", names) == {}


def test_every_band_opens_when_none_holds_records() -> None:
    assert BandGate().open_bands({0: False, 1: False, 2: False}, now=0.0) == {0, 1, 2}


def test_the_highest_band_with_records_and_those_above_it_open_the_lower_ones_wait() -> None:
    gate = BandGate()
    assert gate.open_bands({0: True, 1: True, 2: False}, now=0.0) == {1, 2}
    assert gate.open_bands({0: True, 1: False, 2: False}, now=1.0) == {0, 1, 2}


def test_a_band_held_past_the_deadline_is_let_through_for_a_while_then_held_again() -> None:
    gate = BandGate(max_hold_s=10.0, grace_s=1.0)
    busy = {0: True, 1: True}
    assert gate.open_bands(busy, now=0.0) == {1}
    assert gate.open_bands(busy, now=9.9) == {1}
    assert gate.open_bands(busy, now=10.0) == {0, 1}
    assert gate.open_bands(busy, now=10.9) == {0, 1}
    assert gate.open_bands(busy, now=11.0) == {1}
    assert gate.open_bands(busy, now=20.9) == {1}
    assert gate.open_bands(busy, now=21.0) == {0, 1}


def test_a_band_that_catches_up_starts_its_wait_afresh() -> None:
    gate = BandGate(max_hold_s=10.0, grace_s=1.0)
    assert gate.open_bands({0: True, 1: True}, now=0.0) == {1}
    assert gate.open_bands({0: True, 1: False}, now=8.0) == {0, 1}
    assert gate.open_bands({0: True, 1: True}, now=9.0) == {1}
    assert gate.open_bands({0: True, 1: True}, now=18.9) == {1}


def test_a_band_not_polled_yet_holds_the_lower_ones_back() -> None:
    turns = BandTurns()

    assert turns.order({0, 2}, now=0.0) == [2]


def test_a_joining_band_holds_the_lower_ones_until_it_has_had_time_to_join() -> None:
    turns = BandTurns(join_s=6.0)
    turns.polled(2, 0.0, brought=False)

    assert turns.order({0, 2}, now=5.0) == [2]
    assert turns.order({0, 2}, now=6.5) == [2, 0], "empty after joining: both, highest first"


def test_a_band_that_brought_records_lingers_then_lets_the_lower_ones_through() -> None:
    turns = BandTurns(linger_s=0.5)
    turns.polled(2, 0.0, brought=True)
    turns.polled(2, 0.3, brought=False)

    assert turns.order({0, 2}, now=0.4) == [2]
    assert turns.order({0, 2}, now=0.6) == [2, 0]


def test_a_lower_band_held_too_long_gets_its_turn() -> None:
    turns = BandTurns(gate=BandGate(max_hold_s=10.0, grace_s=1.0))
    orders = []
    for second in range(12):
        turns.polled(1, float(second), brought=True)
        orders.append(turns.order({0, 1}, now=float(second)))
    assert orders[:10] == [[1]] * 10
    assert orders[10] == [1, 0], "after 10 s held, band 0 is polled too (for a second)"
