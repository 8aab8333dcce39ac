"""Which check requests a producer passes to its checker: each half's last one, unanswered."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapter.transaction.check_backlog import DecidedHalves, half_of, superseded
from adapter.wire.records import CheckRequest
from tests.records import EXAMPLES

pytestmark = pytest.mark.timeout(60)

EXAMPLE = EXAMPLES[CheckRequest]
assert isinstance(EXAMPLE, CheckRequest)


def asked(half_offset: int, check_times: int) -> CheckRequest:
    return dataclasses.replace(EXAMPLE, half_offset=half_offset, check_times=check_times)


def test_twelve_rounds_of_requests_about_three_halves_leave_each_halfs_last_round() -> None:
    requests = [asked(half, round_) for round_ in range(1, 13) for half in (10, 20, 30)]

    replaced = superseded(requests)
    kept = [request for i, request in enumerate(requests) if i not in replaced]

    assert [(r.half_offset, r.check_times) for r in kept] == [(10, 12), (20, 12), (30, 12)]


@given(st.lists(st.tuples(st.integers(0, 4), st.integers(1, 15)), max_size=40))
def test_exactly_one_request_per_half_survives_and_it_is_the_last_read(
    reads: list[tuple[int, int]],
) -> None:
    requests = [asked(half, check) for half, check in reads]

    replaced = superseded(requests)
    kept = [i for i in range(len(requests)) if i not in replaced]

    assert sorted(half_of(requests[i]) for i in kept) == sorted(
        {half_of(request) for request in requests}
    )
    for i in kept:
        later = requests[i + 1 :]
        assert half_of(requests[i]) not in {half_of(request) for request in later}


def test_a_decided_half_is_never_asked_again_whatever_the_check() -> None:
    decided = DecidedHalves()
    decided.remember(asked(10, check_times=3))

    assert not decided.needs_answer(asked(10, check_times=3))
    assert not decided.needs_answer(asked(10, check_times=9))
    assert decided.needs_answer(asked(11, check_times=1)), "another half is asked"


def test_a_half_answered_unknown_is_asked_again_at_any_later_request() -> None:
    """Not remembered: a coordinator that counted again from 1 still gets its answers."""
    decided = DecidedHalves()

    assert decided.needs_answer(asked(10, check_times=4))
    assert decided.needs_answer(asked(10, check_times=1))


def test_another_message_at_the_offset_of_a_decided_one_is_asked() -> None:
    """A HALF topic deleted and made again reuses its offsets."""
    decided = DecidedHalves()
    decided.remember(asked(10, check_times=1))

    other = dataclasses.replace(asked(10, check_times=1), transaction_id="7F0000010001FFFF")
    assert decided.needs_answer(other)


def test_the_memory_forgets_the_oldest_half_first_and_stays_bounded() -> None:
    decided = DecidedHalves(capacity=2)
    for half in (10, 20, 30):
        decided.remember(asked(half, check_times=1))

    assert len(decided) == 2
    assert decided.needs_answer(asked(10, check_times=1)), "forgotten: one more call, no harm"
    assert not decided.needs_answer(asked(30, check_times=1))


def test_a_memory_of_no_halves_is_refused() -> None:
    with pytest.raises(ValueError, match="capacity must be at least 1"):
        DecidedHalves(capacity=0)
