"""Which check requests a producer passes to its checker: each half's last one, unanswered."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapter.transaction.check_backlog import AnsweredChecks, half_of, superseded
from adapter.wire.records import CheckRequest
from tests.records import EXAMPLES

pytestmark = pytest.mark.timeout(60)

EXAMPLE = EXAMPLES[CheckRequest]
assert isinstance(EXAMPLE, CheckRequest)


def asked(half_offset: int, check_times: int) -> CheckRequest:
    return dataclasses.replace(EXAMPLE, half_offset=half_offset, check_times=check_times)


def test_twelve_rounds_of_requests_about_three_halves_leave_each_halfs_last_round() -> None:
    requests = [asked(half, round_) for round_ in range(1, 13) for half in (10, 20, 30)]
    backlog = list(enumerate(requests))

    replaced = superseded(backlog)
    kept = [request for i, request in backlog if i not in replaced]

    assert [(r.half_offset, r.check_times) for r in kept] == [(10, 12), (20, 12), (30, 12)]


@given(st.lists(st.tuples(st.integers(0, 4), st.integers(1, 15)), max_size=40))
def test_exactly_one_request_per_half_survives_and_it_is_the_last_read(
    reads: list[tuple[int, int]],
) -> None:
    backlog = [(i, asked(half, check)) for i, (half, check) in enumerate(reads)]

    replaced = superseded(backlog)
    kept = [i for i in range(len(backlog)) if i not in replaced]

    assert sorted(half_of(backlog[i][1]) for i in kept) == sorted(
        {half_of(request) for _at, request in backlog}
    )
    for i in kept:
        later = [request for _at, request in backlog[i + 1 :]]
        assert half_of(backlog[i][1]) not in {half_of(request) for request in later}


def test_a_decided_half_is_never_asked_again_whatever_the_check() -> None:
    answered = AnsweredChecks()
    answered.remember(asked(10, check_times=3), decided=True)

    assert not answered.needs_answer(asked(10, check_times=3))
    assert not answered.needs_answer(asked(10, check_times=9))
    assert answered.needs_answer(asked(11, check_times=1)), "another half is asked"


def test_a_half_answered_unknown_is_asked_again_only_for_a_later_check() -> None:
    answered = AnsweredChecks()
    answered.remember(asked(10, check_times=3), decided=False)

    assert not answered.needs_answer(asked(10, check_times=2)), "an older request, delivered again"
    assert not answered.needs_answer(asked(10, check_times=3))
    assert answered.needs_answer(asked(10, check_times=4))


def test_a_decision_is_not_forgotten_by_a_later_unknown() -> None:
    answered = AnsweredChecks()
    answered.remember(asked(10, check_times=1), decided=True)
    answered.remember(asked(10, check_times=2), decided=False)

    assert not answered.needs_answer(asked(10, check_times=5))


def test_the_memory_forgets_the_oldest_half_first_and_stays_bounded() -> None:
    answered = AnsweredChecks(capacity=2)
    for half in (10, 20, 30):
        answered.remember(asked(half, check_times=1), decided=True)

    assert len(answered) == 2
    assert answered.needs_answer(asked(10, check_times=1)), "forgotten: one more call, no harm"
    assert not answered.needs_answer(asked(30, check_times=1))


def test_a_memory_of_no_halves_is_refused() -> None:
    with pytest.raises(ValueError, match="capacity must be at least 1"):
        AnsweredChecks(capacity=0)
