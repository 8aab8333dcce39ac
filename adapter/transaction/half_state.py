"""Where one half message stands, and the moves between stands the protocol allows.

Reproduces what RocketMQ's ``TransactionalMessageServiceImpl`` keeps implicitly for a half
message: prepared until an op record says it is done, checked meanwhile. Here the stand is
explicit and every change goes through :func:`advance`, which refuses a move the protocol does
not allow.

Known gaps: none; pure.
"""

from __future__ import annotations

import enum

from adapter.exceptions import Bug


class HalfState(enum.Enum):
    """Where a half message stands. RocketMQ keeps this implicitly (a half message with no op
    record is prepared; one whose op record says ``d`` is done); here it is explicit and every
    change goes through :func:`advance`, which refuses a move the protocol does not allow."""

    PREPARED = "prepared"
    """Stored in HALF, no decision yet, not checked yet."""
    CHECKING = "checking"
    """No decision yet (or UNKNOWN), checked at least once."""
    COMMITTED = "committed"
    ROLLED_BACK = "rolled back"
    DISCARDED = "discarded"
    """Given up on after ``check_max`` checks or the retention; parked, resumable."""


_MOVES: dict[HalfState, frozenset[HalfState]] = {
    HalfState.PREPARED: frozenset(
        {HalfState.CHECKING, HalfState.COMMITTED, HalfState.ROLLED_BACK, HalfState.DISCARDED}
    ),
    HalfState.CHECKING: frozenset(
        {HalfState.CHECKING, HalfState.COMMITTED, HalfState.ROLLED_BACK, HalfState.DISCARDED}
    ),
    HalfState.COMMITTED: frozenset(),
    HalfState.ROLLED_BACK: frozenset(),
    HalfState.DISCARDED: frozenset(),
}


class IllegalTransition(Bug):
    """A half message was asked to move where the protocol does not allow (a bug, never
    input: decisions on resolved messages are :class:`Duplicate` s, not transitions)."""


def advance(state: HalfState, to: HalfState) -> HalfState:
    """``to``, if a half message in ``state`` may move there; :class:`IllegalTransition` if not."""
    if to not in _MOVES[state]:
        raise IllegalTransition(f"a {state.value} half message cannot become {to.value}")
    return to
