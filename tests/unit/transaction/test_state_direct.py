"""The coordinator's state with half messages committed directly: a COMMIT that is not the
producer's own is held until a search of the queue can be final, then applied with one."""

from __future__ import annotations

import dataclasses

from adapter.transaction.config import CheckPolicy
from adapter.transaction.state import Check, Commit, Duplicate, HalfInfo, PartitionState
from adapter.transaction.timing import CLOCK_SKEW_ALLOWANCE_MS
from adapter.wire.records import EndTransaction, TransactionDecision

POLICY = CheckPolicy(transaction_timeout_ms=1_000, check_interval_ms=30_000, check_max=3)
GROUP = "PG_ORDERS"
FENCE_MS = 2_000
SEARCHABLE = FENCE_MS + CLOCK_SKEW_ALLOWANCE_MS  # after the born time (0)


def direct_state() -> PartitionState[str]:
    state: PartitionState[str] = PartitionState(POLICY, half_start=0, end_start=0, op_start=0)
    state.half(0, HalfInfo("t0", GROUP, 0, direct_fence_ms=FENCE_MS), "body", now_ms=10)
    return state


def commit(*, from_check: bool = False) -> EndTransaction:
    return EndTransaction(
        transaction_id="t0",
        producer_group=GROUP,
        half_partition=0,
        half_offset=0,
        decision=TransactionDecision.COMMIT,
        from_check=from_check,
        timestamp=0,
    )


def test_the_producer_s_own_direct_commit_is_recorded_without_a_search() -> None:
    [action] = direct_state().end(0, commit(), now_ms=50, delivered=True)
    assert isinstance(action, Commit)
    assert action.delivered
    assert not action.search


def test_another_commit_before_the_fence_passed_is_applied_with_a_search_once_it_passes() -> None:
    state = direct_state()
    assert state.end(0, commit(), now_ms=50) == []
    assert state.pending_count == 1, "held: a direct append may still land"
    assert state.positions()[1] == 0, "END is read again from it after a crash"
    assert state.due(SEARCHABLE - 1, 10) == []
    [action] = state.due(SEARCHABLE, 10)
    assert isinstance(action, Commit), "applied, not left to a check-back"
    assert action.search
    assert state.pending_count == 0
    assert state.positions()[1] == 1


def test_a_decision_read_after_a_held_commit_changes_nothing() -> None:
    state = direct_state()
    state.end(0, commit(), now_ms=50)
    rollback = dataclasses.replace(commit(), decision=TransactionDecision.ROLLBACK)
    [duplicate] = state.end(1, rollback, now_ms=60)
    assert isinstance(duplicate, Duplicate)
    [action] = state.due(SEARCHABLE, 10)
    assert isinstance(action, Commit)


def test_a_held_commit_read_inside_its_window_is_not_refused_for_being_applied_later() -> None:
    state: PartitionState[str] = PartitionState(POLICY, half_start=0, end_start=0, op_start=0)
    info = HalfInfo("t0", GROUP, 0, immunity_ms=0, direct_fence_ms=FENCE_MS)
    state.half(0, info, "body", now_ms=10)
    state.end(0, commit(), now_ms=POLICY.transaction_timeout_ms - 1)
    [action] = state.due(SEARCHABLE, 10)
    assert isinstance(action, Commit)


def test_a_commit_once_the_fence_passed_asks_for_a_search_of_the_queue() -> None:
    [action] = direct_state().end(0, commit(from_check=True), now_ms=SEARCHABLE)
    assert isinstance(action, Commit)
    assert action.search
    assert not action.delivered


def test_a_direct_half_message_is_checked_no_earlier_than_a_search_can_be_final() -> None:
    state = direct_state()
    assert state.next_due_ms() == SEARCHABLE, "not at born + 1 s, the transaction timeout"
    assert state.due(SEARCHABLE - 1, 10) == []
    [check] = state.due(SEARCHABLE, 10)
    assert isinstance(check, Check)


def test_a_half_message_not_sent_directly_is_committed_without_a_search() -> None:
    state: PartitionState[str] = PartitionState(POLICY, half_start=0, end_start=0, op_start=0)
    state.half(0, HalfInfo("t0", GROUP, 0), "body", now_ms=10)
    [action] = state.end(0, commit(), now_ms=20)
    assert isinstance(action, Commit)
    assert not action.search
    assert not action.delivered
