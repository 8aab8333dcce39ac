"""Recall: the handle names its topic, message and deliver time, sealed for its cluster; of a
recall racing a delivery, the one first in the recall topic's log wins, never both; and what
the log holds already decides before anything is written."""

from __future__ import annotations

import base64

import pytest

from adapter.schedule.recall import (
    DELIVERED,
    DROPPED,
    LOST_RECALL_MARK,
    RECALL,
    BadRecallHandle,
    Marker,
    RecallHandle,
    Seen,
    delivered_before,
    recalled_before,
    seen_before,
)

pytestmark = pytest.mark.timeout(30)

CLUSTER = "rmqkafkaadapterAAAAAA"
MINE = RecallHandle("Orders", "ID1", 1_700_000_000_000)


def text_of(handle: str) -> list[str]:
    return base64.urlsafe_b64decode(handle + "=" * (-len(handle) % 4)).decode().split(" ")


def handle_of(fields: list[str]) -> str:
    return base64.urlsafe_b64encode(" ".join(fields).encode()).decode().rstrip("=")


def test_a_handle_decodes_to_what_it_was_made_of() -> None:
    assert RecallHandle.decode(MINE.encode(CLUSTER), "Orders", CLUSTER) == MINE


def test_a_handle_for_another_topic_is_refused_naming_both() -> None:
    with pytest.raises(BadRecallHandle, match="belongs to topic 'Orders', not 'Payments'"):
        RecallHandle.decode(MINE.encode(CLUSTER), "Payments", CLUSTER)


@pytest.mark.parametrize(
    "handle",
    ["", "not base64 at all!", "djEgT3JkZXJz", "fake-recall-handle", handle_of(["v2", "Orders"])],
)
def test_a_handle_we_did_not_issue_is_refused(handle: str) -> None:
    with pytest.raises(BadRecallHandle, match="is not valid"):
        RecallHandle.decode(handle, "Orders", CLUSTER)


@pytest.mark.parametrize(
    ("field", "value"),
    [(1, "Payments"), (2, "ID2"), (3, "1700003600000"), (4, "AAAAAAAAAAAAAAAA")],
    ids=["another topic", "another message", "a later deliver time", "another seal"],
)
def test_an_altered_handle_is_refused_as_not_issued_here(field: int, value: str) -> None:
    fields = text_of(MINE.encode(CLUSTER))
    fields[field] = value
    topic = fields[1]
    with pytest.raises(BadRecallHandle, match="not issued by this Kafka cluster"):
        RecallHandle.decode(handle_of(fields), topic, CLUSTER)


def test_a_handle_from_another_cluster_is_refused_naming_this_one() -> None:
    theirs = MINE.encode("anotherClusterBBBBBBB")
    with pytest.raises(BadRecallHandle, match=f"not issued by this Kafka cluster \\({CLUSTER}\\)"):
        RecallHandle.decode(theirs, "Orders", CLUSTER)


def test_a_handle_of_the_release_before_seals_is_refused_saying_why() -> None:
    unsealed = handle_of(["v1", "Orders", "ID1", "1700000000000"])
    with pytest.raises(BadRecallHandle, match="issued before handles were sealed"):
        RecallHandle.decode(unsealed, "Orders", CLUSTER)


def test_the_log_before_a_recall_decides_a_delivered_or_recalled_timer_without_a_record() -> None:
    assert seen_before([], "ID1") is Seen.NOTHING
    assert seen_before([Marker(3, "ID2", DELIVERED)], "ID1") is Seen.NOTHING
    assert seen_before([Marker(3, "ID1", DELIVERED)], "ID1") is Seen.DELIVERED
    assert seen_before([Marker(3, "ID1", RECALL)], "ID1") is Seen.RECALLED
    assert seen_before([Marker(3, "ID1", RECALL), Marker(5, "ID1", DROPPED)], "ID1") is (
        Seen.RECALLED
    )
    assert seen_before([Marker(3, "ID1", DROPPED), Marker(7, "ID1", DELIVERED)], "ID1") is (
        Seen.DELIVERED
    ), "a delivery seen anywhere wins"


def test_the_loser_of_a_recall_marks_the_delivery_so_compaction_keeps_the_delivery() -> None:
    # Compaction keeps the last record of a key: after DELIVERED, RECALL (lost) and the
    # loser's mark, what is left must still refuse a later recall.
    log = [
        Marker(3, "ID1", DELIVERED),
        Marker(5, "ID1", RECALL),
        Marker(6, "ID1", LOST_RECALL_MARK),
    ]
    kept = [
        m for m in log if m.offset == max(o.offset for o in log if o.message_id == m.message_id)
    ]
    assert seen_before(kept, "ID1") is Seen.DELIVERED


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
