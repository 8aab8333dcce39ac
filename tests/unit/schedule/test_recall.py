"""Recall: the handle names its topic, message and deliver time; and of a recall racing a
delivery, the one first in the recall topic's log wins, never both."""

from __future__ import annotations

import pytest

from adapter.schedule.recall import (
    DELIVERED,
    DROPPED,
    RECALL,
    BadRecallHandle,
    Marker,
    RecallHandle,
    delivered_before,
    recalled_before,
)

pytestmark = pytest.mark.timeout(30)


def test_a_handle_decodes_to_what_it_was_made_of() -> None:
    handle = RecallHandle("Orders", "ID1", 1_700_000_000_000)
    assert RecallHandle.decode(handle.encode(), "Orders") == handle


def test_a_handle_for_another_topic_is_refused_naming_both() -> None:
    handle = RecallHandle("Orders", "ID1", 1).encode()
    with pytest.raises(BadRecallHandle, match="belongs to topic 'Orders', not 'Payments'"):
        RecallHandle.decode(handle, "Payments")


@pytest.mark.parametrize("handle", ["", "not base64 at all!", "djEgT3JkZXJz", "fake-recall-handle"])
def test_a_handle_we_did_not_issue_is_refused(handle: str) -> None:
    with pytest.raises(BadRecallHandle, match="is not valid"):
        RecallHandle.decode(handle, "Orders")


def test_a_recall_after_a_committed_delivery_of_the_same_message_loses() -> None:
    markers = [Marker(3, "OTHER", DELIVERED), Marker(5, "ID1", DELIVERED)]
    assert delivered_before(markers, "ID1", recall_offset=9)
    assert not delivered_before(markers, "ID1", recall_offset=5)
    assert not delivered_before([Marker(5, "ID1", DROPPED)], "ID1", recall_offset=9)
    assert not delivered_before([Marker(5, "ID1", RECALL)], "ID1", recall_offset=9)


def test_a_delivery_whose_marker_follows_a_recall_must_not_commit() -> None:
    recalls = {"ID1": 4}
    assert recalled_before(recalls, "ID1", marker_offset=7)
    assert not recalled_before(recalls, "ID1", marker_offset=3)
    assert not recalled_before(recalls, "ID2", marker_offset=7)


@pytest.mark.parametrize("recall_at", range(10))
@pytest.mark.parametrize("marker_at", range(10))
def test_exactly_one_of_a_recall_and_a_delivery_wins_wherever_they_land(
    recall_at: int, marker_at: int
) -> None:
    if recall_at == marker_at:
        return  # one offset holds one record
    delivery_wins = not recalled_before({"ID1": recall_at}, "ID1", marker_at)
    recall_wins = not delivered_before([Marker(marker_at, "ID1", DELIVERED)], "ID1", recall_at)
    assert delivery_wins != recall_wins
