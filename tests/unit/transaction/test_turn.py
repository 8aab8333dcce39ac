"""A coordinator turn waits only while everything in it needs nothing but its OP record."""

from __future__ import annotations

from confluent_kafka import Message as KafkaRecord

from adapter.transaction.config import CheckPolicy
from adapter.transaction.state import Action, PartitionState
from adapter.transaction.turn import Turn, may_wait
from adapter.wire.records import TransactionDecision
from tests.unit.transaction.test_state import end, info

POLICY = CheckPolicy(transaction_timeout_ms=6_000, check_interval_ms=30_000, check_max=3)
LINGER_S = 0.125


def decided(decision: TransactionDecision, *, delivered: bool) -> Action[bytes]:
    state: PartitionState[bytes] = PartitionState(POLICY, half_start=0, end_start=0, op_start=0)
    state.half(0, info("t0"), b"body", now_ms=10)
    [action] = state.end(0, end("t0", 0, decision), now_ms=20, delivered=delivered)
    return action


def turn_of(*actions: Action[bytes], at_s: float = 0.0) -> Turn:
    turn = Turn()
    turn.actions.extend((0, a) for a in actions)
    turn.note(0, at_s)
    return turn


def test_a_commit_the_producer_delivered_and_a_rollback_may_wait() -> None:
    assert may_wait(decided(TransactionDecision.COMMIT, delivered=True))
    assert may_wait(decided(TransactionDecision.ROLLBACK, delivered=False))


def test_a_commit_the_coordinator_must_deliver_may_not_wait() -> None:
    assert not may_wait(decided(TransactionDecision.COMMIT, delivered=False))


def test_a_turn_of_recorded_decisions_waits_for_the_linger_then_is_due() -> None:
    turn = turn_of(decided(TransactionDecision.COMMIT, delivered=True), at_s=5.0)
    assert not turn.due(5.0625, LINGER_S, max_actions=100)
    assert turn.due(5.125, LINGER_S, max_actions=100)


def test_the_linger_counts_from_the_first_decision_not_the_last() -> None:
    turn = turn_of(decided(TransactionDecision.ROLLBACK, delivered=False), at_s=5.0)
    turn.actions.append((0, decided(TransactionDecision.COMMIT, delivered=True)))
    turn.note(1, 5.1)
    assert turn.due(5.125, LINGER_S, max_actions=100)


def test_a_delivery_makes_the_whole_turn_due_at_once() -> None:
    turn = turn_of(decided(TransactionDecision.COMMIT, delivered=True), at_s=5.0)
    turn.actions.append((0, decided(TransactionDecision.COMMIT, delivered=False)))
    turn.note(1, 5.01)
    assert turn.due(5.01, LINGER_S, max_actions=100)


def test_a_read_mark_or_a_parked_record_makes_it_due_at_once() -> None:
    marked = Turn(marks=[(0, 1_000)])
    marked.note(0, 5.0)
    assert marked.due(5.0, LINGER_S, max_actions=100)


def test_a_full_turn_is_due_at_once() -> None:
    turn = turn_of(*[decided(TransactionDecision.ROLLBACK, delivered=False)] * 3)
    assert turn.due(0.0, LINGER_S, max_actions=3)


def test_an_empty_turn_is_not_due() -> None:
    turn = Turn()
    turn.note(0, 5.0)
    assert not turn.due(99.0, LINGER_S, max_actions=100)


def test_a_revoked_partition_leaves_nothing_in_the_open_turn_to_be_parked_twice() -> None:
    turn = turn_of(decided(TransactionDecision.ROLLBACK, delivered=False))
    turn.actions.append((1, decided(TransactionDecision.ROLLBACK, delivered=False)))
    turn.poison += [(KafkaRecord(topic="END", partition=p, offset=7), "corrupt") for p in (0, 1)]
    turn.marks += [(0, 100), (1, 100)]
    turn.touched |= {0, 1}
    turn.drop([0])
    assert [p for p, _ in turn.actions] == [1]
    assert [record.partition() for record, _ in turn.poison] == [1]
    assert turn.marks == [(1, 100)]
    assert turn.touched == {1}
