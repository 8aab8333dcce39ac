"""The coordinator's pure state machine: decisions, checks on time, discards, crash recovery."""

from __future__ import annotations

import pytest

from adapter.transaction.config import CheckPolicy
from adapter.transaction.state import (
    Check,
    Commit,
    Discard,
    Duplicate,
    HalfInfo,
    HalfState,
    IllegalTransition,
    PartitionState,
    Refuse,
    Rollback,
    advance,
)
from adapter.wire.records import EndTransaction, OpKind, OpRecord, TransactionDecision

POLICY = CheckPolicy(transaction_timeout_ms=6_000, check_interval_ms=30_000, check_max=3)
GROUP = "PG_ORDERS"


def new_state(policy: CheckPolicy = POLICY) -> PartitionState[str]:
    return PartitionState(policy, half_start=0, end_start=0, op_start=0)


def info(txn: str, born: int = 0, immunity_ms: int | None = None) -> HalfInfo:
    return HalfInfo(txn, GROUP, born, immunity_ms)


def end(
    txn: str,
    half_offset: int,
    decision: TransactionDecision = TransactionDecision.COMMIT,
    *,
    from_check: bool = False,
    group: str = GROUP,
) -> EndTransaction:
    return EndTransaction(
        transaction_id=txn,
        producer_group=group,
        half_partition=0,
        half_offset=half_offset,
        decision=decision,
        from_check=from_check,
        timestamp=0,
    )


def test_a_commit_delivers_the_half_message() -> None:
    state = new_state()
    assert state.half(0, info("t0"), "body", now_ms=10) == []
    [action] = state.end(0, end("t0", 0), now_ms=20)
    assert isinstance(action, Commit)
    assert action.pending.payload == "body"
    assert state.pending_count == 0


def test_a_rollback_delivers_nothing() -> None:
    state = new_state()
    state.half(0, info("t0"), "body", now_ms=10)
    [action] = state.end(0, end("t0", 0, TransactionDecision.ROLLBACK), now_ms=20)
    assert isinstance(action, Rollback)


def test_unknown_changes_nothing() -> None:
    state = new_state()
    state.half(0, info("t0"), "body", now_ms=10)
    assert state.end(0, end("t0", 0, TransactionDecision.UNKNOWN), now_ms=20) == []
    assert state.pending_count == 1


def test_a_second_decision_is_a_duplicate_and_delivers_nothing() -> None:
    state = new_state()
    state.half(0, info("t0"), "body", now_ms=10)
    state.end(0, end("t0", 0), now_ms=20)
    [again] = state.end(1, end("t0", 0), now_ms=30)
    [answer] = state.end(2, end("t0", 0, TransactionDecision.ROLLBACK, from_check=True), 40)
    assert isinstance(again, Duplicate)
    assert isinstance(answer, Duplicate)


def test_records_read_before_are_known_so_a_consumer_that_goes_back_is_not_obeyed() -> None:
    state = new_state()
    state.half(0, info("t0"), "body", now_ms=10)
    state.half(1, info("t1"), "body", now_ms=10)
    state.end(0, end("t0", 0), now_ms=20)
    assert [state.read_already(o, end=False) for o in (0, 1, 2)] == [True, True, False]
    assert state.read_already(0, end=True)
    assert not state.read_already(1, end=True)


def test_records_before_the_restored_positions_count_as_read() -> None:
    state = PartitionState(POLICY, half_start=5, end_start=3, op_start=0)
    assert [state.read_already(o, end=False) for o in (4, 5)] == [True, False]
    assert [state.read_already(o, end=True) for o in (2, 3)] == [True, False]


def test_a_decision_naming_another_transaction_or_group_is_refused() -> None:
    state = new_state()
    state.half(0, info("t0"), "body", now_ms=10)
    [wrong_id] = state.end(0, end("t9", 0), now_ms=20)
    [wrong_group] = state.end(1, end("t0", 0, group="PG_OTHER"), now_ms=20)
    assert isinstance(wrong_id, Refuse)
    assert "t9" in wrong_id.reason
    assert isinstance(wrong_group, Refuse)
    assert "PG_OTHER" in wrong_group.reason
    assert state.pending_count == 1
    state.end(2, end("t0", 0), now_ms=30)
    [late_wrong] = state.end(3, end("t9", 0), now_ms=40)
    assert isinstance(late_wrong, Refuse)


def test_a_decision_that_arrives_before_its_half_message_waits_for_it() -> None:
    state = new_state()
    assert state.end(0, end("t0", 0), now_ms=5) == []
    assert state.positions()[1] == 0  # the waiting END is read again after a crash
    [action] = state.half(0, info("t0"), "body", now_ms=10)
    assert isinstance(action, Commit)
    assert state.positions() == (1, 1, 0)


def test_a_decision_for_a_half_message_that_never_comes_is_refused_after_the_wait() -> None:
    state = new_state()
    state.end(0, end("t0", 7), now_ms=0)
    assert state.expire_waiting(now_ms=5_000, half_end_offset=3) == []
    [refused] = state.expire_waiting(now_ms=10_000, half_end_offset=3)
    assert isinstance(refused, Refuse)
    assert "offset 7" in refused.reason
    assert state.positions()[1] == 1


def test_the_first_check_comes_at_birth_plus_the_transaction_timeout() -> None:
    state = new_state()
    state.half(0, info("t0", born=1_000), "body", now_ms=1_000)
    assert state.next_due_ms() == 7_000
    assert state.due(now_ms=6_999, limit=10) == []
    [check] = state.due(now_ms=7_000, limit=10)
    assert isinstance(check, Check)
    assert check.pending.check_times == 1
    assert state.next_due_ms() == 37_000


def test_the_immunity_property_replaces_the_transaction_timeout() -> None:
    state = new_state()
    state.half(0, info("t0", born=0, immunity_ms=60_000), "body", now_ms=0)
    assert state.next_due_ms() == 60_000


def test_a_late_producer_decision_past_the_immunity_window_is_refused() -> None:
    state = new_state()
    state.half(0, info("t0", born=0, immunity_ms=10_000), "body", now_ms=0)
    [late] = state.end(0, end("t0", 0), now_ms=10_001)
    assert isinstance(late, Refuse)
    assert "immunity" in late.reason
    [answer] = state.end(1, end("t0", 0, from_check=True), now_ms=10_002)
    assert isinstance(answer, Commit)


def test_a_message_never_decided_is_discarded_after_check_max_checks() -> None:
    state = new_state()
    state.half(0, info("t0"), "body", now_ms=0)
    kinds = []
    now = 0
    while state.pending_count:
        due = state.next_due_ms()
        assert due is not None
        now = due
        kinds += [type(a).__name__ for a in state.due(now, limit=10)]
    assert kinds == ["Check", "Check", "Check", "Discard"]


def test_a_message_older_than_the_retention_is_discarded() -> None:
    state = new_state(CheckPolicy(retention_ms=20_000))
    state.half(0, info("t0"), "body", now_ms=0)
    [action] = state.due(now_ms=25_000, limit=10)
    assert isinstance(action, Discard)
    assert "retention" in action.reason


def test_positions_keep_the_oldest_pending_half_message() -> None:
    state = new_state()
    for offset in range(3):
        state.half(offset, info(f"t{offset}"), "body", now_ms=0)
    state.end(0, end("t1", 1), now_ms=1)
    state.op_written(5)
    half, end_pos, op = state.positions()
    assert (half, end_pos) == (0, 1)
    assert op == 0  # everything about offset 0 is in OP from its mark on


def test_recovery_from_op_records_skips_resolved_messages_and_keeps_check_counts() -> None:
    state: PartitionState[str] = PartitionState(POLICY, half_start=10, end_start=0, op_start=4)
    state.recover_op(op_record(10, OpKind.CHECK, check_times=1, timestamp=1_000), 4)
    state.recover_op(op_record(10, OpKind.CHECK, check_times=2, timestamp=31_000), 5)
    state.recover_op(op_record(11, OpKind.COMMIT), 6)
    state.recover_op(op_record(3, OpKind.COMMIT), 7)  # behind the HALF position: ignored
    state.recovery_done()
    state.half(10, info("t10"), "body", now_ms=40_000)
    state.half(11, info("t11"), "body", now_ms=40_000)
    assert [p.offset for p in state.pending()] == [10]
    assert state.pending()[0].check_times == 2
    assert state.next_due_ms() == 61_000
    [duplicate] = state.end(0, end("t11", 11), now_ms=40_001)
    assert isinstance(duplicate, Duplicate)


def test_an_unreadable_op_record_skipped_by_the_replay_is_not_read_again() -> None:
    state: PartitionState[str] = PartitionState(POLICY, half_start=0, end_start=0, op_start=4)
    state.skip_op(4)
    state.skip_op(5)
    state.recovery_done()
    assert state.positions() == (0, 0, 6)


def op_record(
    half_offset: int, kind: OpKind, *, check_times: int = 0, timestamp: int = 0
) -> OpRecord:
    return OpRecord(
        transaction_id=f"t{half_offset}",
        half_partition=0,
        half_offset=half_offset,
        kind=kind,
        check_times=check_times,
        producer_group=GROUP,
        timestamp=timestamp,
    )


def test_no_check_while_the_decisions_written_before_the_due_time_are_unread() -> None:
    state = new_state()
    state.half(0, info("t0", born=0), "body", now_ms=0)
    assert state.due(now_ms=60_000, limit=10, decisions_read_to_ms=5_999) == []
    [check] = state.due(now_ms=60_000, limit=10, decisions_read_to_ms=6_000)
    assert isinstance(check, Check)


def test_a_half_message_moves_only_as_the_protocol_allows() -> None:
    assert advance(HalfState.PREPARED, HalfState.CHECKING) is HalfState.CHECKING
    assert advance(HalfState.CHECKING, HalfState.CHECKING) is HalfState.CHECKING
    for end in (HalfState.COMMITTED, HalfState.ROLLED_BACK, HalfState.DISCARDED):
        assert advance(HalfState.CHECKING, end) is end
        with pytest.raises(IllegalTransition, match=f"cannot become {HalfState.CHECKING.value}"):
            advance(end, HalfState.CHECKING)
    with pytest.raises(IllegalTransition):
        advance(HalfState.CHECKING, HalfState.PREPARED)


def test_a_checked_message_is_in_checking_and_its_resolution_is_final() -> None:
    state = new_state()
    state.half(0, info("T0"), "p0", 0)
    [check] = state.due(6_000, 10)
    assert isinstance(check, Check)
    assert check.pending.state is HalfState.CHECKING
    [commit] = state.end(0, end("T0", 0, from_check=True), 7_000)
    assert isinstance(commit, Commit)
    assert commit.pending.state is HalfState.COMMITTED


def test_a_half_message_written_twice_by_one_send_is_delivered_once_whichever_is_named() -> None:
    for named in (0, 1):
        state = new_state()
        state.half(0, info("t0"), "body", now_ms=10)
        state.half(1, info("t0"), "body", now_ms=10)
        assert state.pending_count == 1
        assert state.repeat_of(1) == 0
        [action] = state.end(0, end("t0", named), now_ms=20)
        assert isinstance(action, Commit)
        assert action.pending.offset == 0
        assert state.pending_count == 0
        assert state.due(now_ms=60_000, limit=10) == [], "the repeat is never checked"
        [again] = state.end(1, end("t0", 1 - named), now_ms=30)
        assert isinstance(again, Duplicate)


def test_a_decision_naming_a_copy_not_read_yet_decides_the_pending_first_copy_at_once() -> None:
    state = new_state()
    state.half(0, info("t0"), "body", now_ms=10)
    [action] = state.end(0, end("t0", 1), now_ms=20)
    assert isinstance(action, Commit)
    assert action.pending.offset == 0
    assert action.copies == (1,), "the copy gets an OP record too"
    assert state.pending_count == 0
    assert state.half(1, info("t0"), "body", now_ms=30) == []
    assert state.repeat_of(1) == 0


# -- hole 1 of issue 34: a fast-path COMMIT naming the second copy of a twice-stored half --


def test_a_delivered_commit_naming_an_unread_copy_is_never_checked_and_delivered_again() -> None:
    state = new_state()
    state.half(0, info("t0"), "body", now_ms=0)
    [commit] = state.end(0, end("t0", 1), now_ms=100, delivered=True)
    assert isinstance(commit, Commit)
    assert commit.delivered, "the producer's transaction delivered it: only OP is written"
    assert state.due(now_ms=60_000, limit=10) == [], "nothing left to check"
    assert state.half(1, info("t0"), "body", now_ms=60_001) == []
    [again] = state.end(1, end("t0", 0, from_check=True), now_ms=60_002)
    assert isinstance(again, Duplicate)


def test_a_rollback_naming_an_unread_copy_rolls_the_pending_first_copy_back() -> None:
    state = new_state()
    state.half(0, info("t0"), "body", now_ms=0)
    [rollback] = state.end(0, end("t0", 1, TransactionDecision.ROLLBACK), now_ms=100)
    assert isinstance(rollback, Rollback)
    assert rollback.copies == (1,)
    assert state.due(now_ms=60_000, limit=10) == []


def test_a_decision_read_before_both_copies_decides_the_first_when_it_is_read() -> None:
    state = new_state()
    assert state.end(0, end("t0", 1), now_ms=5, delivered=True) == []
    [commit] = state.half(0, info("t0"), "body", now_ms=10)
    assert isinstance(commit, Commit)
    assert (commit.pending.offset, commit.delivered, commit.copies) == (0, True, (1,))
    assert state.due(now_ms=60_000, limit=10) == []
    assert state.half(1, info("t0"), "body", now_ms=60_001) == []
    assert state.positions()[1] == 1, "the END is decided: its position moves on"


def test_a_successor_that_reads_only_the_second_copy_knows_it_from_its_op_record() -> None:
    state = new_state()
    state.half(0, info("t0"), "body", now_ms=0)
    [commit] = state.end(0, end("t0", 1), now_ms=100, delivered=True)
    assert isinstance(commit, Commit)
    # the successor starts at HALF 1 (the first copy is settled) with OP's two records
    successor: PartitionState[str] = PartitionState(POLICY, half_start=1, end_start=1, op_start=0)
    successor.recover_op(op_record(0, OpKind.COMMIT), 0)
    successor.recover_op(op_record(1, OpKind.COMMIT), 1)
    successor.recovery_done()
    assert successor.half(1, info("t0"), "body", now_ms=200) == []
    assert successor.pending_count == 0
    assert successor.due(now_ms=60_000, limit=10) == []


# -- hole 2 of issue 34: a delivered END that waits is never refused for waiting ------------


def test_a_delivered_end_that_waits_long_is_not_refused_and_decides_its_message_later() -> None:
    state = new_state()
    assert state.end(0, end("t0", 0), now_ms=0, delivered=True) == []
    assert not state.waiting_overdue(now_ms=20_000)
    assert state.expire_waiting(now_ms=20_000, half_end_offset=0) == []
    [commit] = state.half(0, info("t0"), "body", now_ms=21_000)
    assert isinstance(commit, Commit)
    assert commit.delivered
    assert state.due(now_ms=90_000, limit=10) == []


def test_a_delivered_end_for_an_offset_half_never_reached_is_refused_past_the_retention() -> None:
    state = new_state(CheckPolicy(retention_ms=60_000))
    state.end(0, end("t0", 7), now_ms=0, delivered=True)
    assert state.expire_waiting(now_ms=59_999, half_end_offset=3) == []
    assert state.waiting_overdue(now_ms=60_000)
    [refused] = state.expire_waiting(now_ms=60_000, half_end_offset=3)
    assert isinstance(refused, Refuse)


def test_a_plain_end_below_halfs_fresh_end_keeps_waiting() -> None:
    state = new_state()
    state.end(0, end("t0", 2), now_ms=0)
    assert state.waiting_overdue(now_ms=10_000)
    assert state.expire_waiting(now_ms=10_000, half_end_offset=3) == []


# -- hole 4 of issue 34: a rebuilt state's check gate starts closed ------------------------


def test_a_rebuilt_state_checks_nothing_until_a_new_read_mark_is_read_back() -> None:
    state = new_state()
    state.half(0, info("t0"), "body", now_ms=0)
    state.mark.read(50_000)
    assert state.mark.read_to_ms == 50_000
    rebuilt = new_state()  # after a failed turn: the same committed positions, a new state
    rebuilt.half(0, info("t0"), "body", now_ms=60_000)
    assert rebuilt.due(60_000, 10, rebuilt.mark.read_to_ms) == []
    assert rebuilt.mark.wanted(rebuilt.next_due_ms(), 60_000), "a new mark is asked for"
    rebuilt.mark.read(60_000)
    [check] = rebuilt.due(60_000, 10, rebuilt.mark.read_to_ms)
    assert isinstance(check, Check)


def test_a_repeat_of_a_message_already_decided_is_not_pending_again() -> None:
    state = new_state()
    state.half(0, info("t0"), "body", now_ms=10)
    state.end(0, end("t0", 0), now_ms=20)
    assert state.half(1, info("t0"), "body", now_ms=30) == []
    assert state.pending_count == 0


def test_a_discarded_message_resumed_with_a_new_born_time_is_pending_and_checked_again() -> None:
    state = new_state()
    state.half(0, info("t0"), "body", now_ms=10)
    state.end(0, end("t0", 0, decision=TransactionDecision.ROLLBACK), now_ms=20)
    assert state.half(1, info("t0", born=50_000), "body", now_ms=50_000) == []
    assert state.repeat_of(1) is None
    assert state.pending_count == 1
    [check] = state.due(now_ms=60_000, limit=10)
    assert isinstance(check, Check)
    assert check.pending.offset == 1


def test_the_same_transaction_id_from_another_group_is_another_message() -> None:
    state = new_state()
    state.half(0, info("t0"), "body", now_ms=10)
    state.half(1, HalfInfo("t0", "PG_OTHER", 0), "body", now_ms=10)
    assert state.pending_count == 2
    assert state.repeat_of(1) is None


@pytest.mark.parametrize("first", [TransactionDecision.COMMIT, TransactionDecision.ROLLBACK])
def test_of_two_contradicting_producer_decisions_the_first_in_end_wins(
    first: TransactionDecision,
) -> None:
    second = (
        TransactionDecision.ROLLBACK
        if first is TransactionDecision.COMMIT
        else TransactionDecision.COMMIT
    )
    state = new_state()
    state.half(0, info("t0"), "body", now_ms=0)
    [decided] = state.end(0, end("t0", 0, first), now_ms=10)
    [ignored] = state.end(1, end("t0", 0, second), now_ms=20)
    assert isinstance(decided, Commit if first is TransactionDecision.COMMIT else Rollback)
    assert isinstance(ignored, Duplicate)


def test_copies_of_a_send_retried_through_another_proxy_are_one_message_by_their_stamp() -> None:
    state = new_state()
    first = HalfInfo("t0", GROUP, born_ms=10_000, copy_stamp=9_000)
    retried = HalfInfo("t0", GROUP, born_ms=12_500, copy_stamp=9_000)  # born again, later
    state.half(0, first, "body", now_ms=10_000)
    assert state.half(1, retried, "body", now_ms=12_500) == []
    assert state.repeat_of(1) == 0
    assert state.next_due_ms() == 16_000, "checked from the first copy's real birth"
    other_send = HalfInfo("t0", GROUP, born_ms=12_500, copy_stamp=12_000)
    state.half(2, other_send, "body", now_ms=12_500)
    assert state.repeat_of(2) is None
