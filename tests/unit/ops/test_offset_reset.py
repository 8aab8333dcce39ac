"""The offset reset's plan: where each queue moves, and what it skips or replays."""

from __future__ import annotations

import pytest

from adapter.ops.offset_reset import Move, Queue, Target, TargetKind, destination, plan, totals

pytestmark = pytest.mark.timeout(10)


def queue(committed: int | None, *, earliest: int = 10, end: int = 50, at_time: int | None = None):
    return Queue("Orders", 0, earliest, end, committed, at_time)


def test_a_time_moves_to_the_first_message_stored_at_or_after_it() -> None:
    assert destination(queue(40, at_time=25), Target(TargetKind.TIME, 1_000)) == 25


def test_a_time_after_every_message_moves_to_the_end() -> None:
    assert destination(queue(40, at_time=None), Target(TargetKind.TIME, 1_000)) == 50


def test_an_offset_outside_the_retained_range_is_clamped_to_it() -> None:
    assert destination(queue(40), Target(TargetKind.OFFSET, 3)) == 10
    assert destination(queue(40), Target(TargetKind.OFFSET, 99)) == 50
    assert destination(queue(40), Target(TargetKind.OFFSET, 30)) == 30


def test_earliest_and_latest_are_the_retained_range_s_ends() -> None:
    assert destination(queue(40), Target(TargetKind.EARLIEST)) == 10
    assert destination(queue(40), Target(TargetKind.LATEST)) == 50


def test_a_backward_move_replays_and_a_forward_one_skips() -> None:
    assert Move("Orders", 0, 40, 25).replayed == 15
    assert Move("Orders", 0, 40, 25).skipped == 0
    assert Move("Orders", 0, 25, 40).skipped == 15
    assert Move("Orders", 0, 25, 40).replayed == 0


def test_a_queue_without_a_commit_is_planned_from_its_earliest_message() -> None:
    [move] = plan([queue(None)], Target(TargetKind.LATEST))
    assert (move.start, move.to, move.skipped) == (10, 50, 40)


def test_the_plan_is_in_topic_and_partition_order_with_totals() -> None:
    queues = [
        Queue("B", 1, 0, 9, 9),
        Queue("A", 1, 0, 5, 0),
        Queue("A", 0, 0, 5, 5),
    ]
    moves = plan(queues, Target(TargetKind.OFFSET, 5))
    assert [(m.topic, m.partition) for m in moves] == [("A", 0), ("A", 1), ("B", 0 + 1)]
    assert totals(moves) == {"skipped": 5, "replayed": 4, "unchanged": 1}
