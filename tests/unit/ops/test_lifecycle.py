"""How a message's life reads: each record it left becomes a step, in time order."""

from __future__ import annotations

import pytest

from adapter.ops import lifecycle
from adapter.ops.lifecycle import Place
from adapter.wire.records import EndTransaction, OpKind, OpRecord, TransactionDecision

pytestmark = pytest.mark.timeout(10)

HALF = Place("RMQ_SYS_TRANS_HALF_TOPIC", 4, 0)


def end(*, from_check: bool, check_times: int = 0) -> EndTransaction:
    return EndTransaction(
        transaction_id="T", producer_group="PG", half_partition=4, half_offset=0,
        decision=TransactionDecision.COMMIT, from_check=from_check, check_times=check_times,
        timestamp=5,
    )  # fmt: skip


def test_a_decision_says_who_made_it() -> None:
    assert lifecycle.decided(HALF, 1, end(from_check=False)).what == "COMMIT by the producer"
    by_check = lifecycle.decided(HALF, 1, end(from_check=True, check_times=2))
    assert by_check.what == "COMMIT by check-back 2"


def test_a_discard_says_why() -> None:
    op = OpRecord(
        transaction_id="T", half_partition=4, half_offset=0, kind=OpKind.DISCARD, check_times=15,
        producer_group="PG", reason="checked 15 times", timestamp=9,
    )  # fmt: skip
    assert lifecycle.applied(HALF, 9, op).what == "discarded by the checker: checked 15 times"


def test_a_group_s_state_follows_its_commit() -> None:
    place = Place("Orders", 0, 7)
    assert "consumed" in lifecycle.consumed_by("G", 8, place)
    assert "not consumed yet (its commit: 7)" in lifecycle.consumed_by("G", 7, place)
    assert "not consumed yet (its commit: none)" in lifecycle.consumed_by("G", None, place)


def test_retries_and_dead_letters_name_their_group() -> None:
    retry = lifecycle.retried(Place("%RETRY%G", 0, 3), 1, "2")
    assert retry.what == "group G: redelivered (reconsume times 2)"
    dead = lifecycle.dead_lettered(Place("%DLQ%G", 0, 0), 1, "failed 3 deliveries")
    assert dead.what == "group G: dead-lettered (failed 3 deliveries)"


def test_the_steps_are_rendered_in_time_order_in_utc() -> None:
    steps = [lifecycle.delivered(Place("Orders", 0, 1), 2_000), lifecycle.born(1_000, "PG")]
    text = lifecycle.render("ID", steps, ["group G: consumed"], "(scanned 2 records)")
    lines = text.splitlines()
    assert lines[0] == "message ID (times in UTC)"
    assert lines[1] == "  1970-01-01 00:00:01.000  born (producer group PG)"
    assert lines[2] == "  1970-01-01 00:00:02.000  delivered  Orders[0]@1"
    assert lines[3:] == ["  group G: consumed", "(scanned 2 records)"]


def test_a_message_with_no_records_says_so() -> None:
    assert "no record of it in the window" in lifecycle.render("ID", [], [], "(scanned 0)")
