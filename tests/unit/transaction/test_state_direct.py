"""The coordinator's state with half messages committed directly: a COMMIT that is not the
producer's own waits until a search of the queue can be final, then asks for one."""

from __future__ import annotations

from adapter.transaction.config import CheckPolicy
from adapter.transaction.state import Check, Commit, HalfInfo, PartitionState
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


def test_another_commit_before_the_fence_passed_is_left_to_the_check_back() -> None:
    state = direct_state()
    assert state.end(0, commit(), now_ms=SEARCHABLE - 1) == []
    assert state.pending_count == 1, "still pending: the check-back decides"


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
