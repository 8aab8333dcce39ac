"""What the coordinator's state machine asks its shell to do with a half message.

Reproduces the broker's outcomes of an end-transaction request and of a check (reference
sections 1.4 to 1.9): deliver and record (COMMIT), record only (ROLLBACK), ask the producer group
(a check), give up and park (a discard); and the decisions it does not apply (refused, or
duplicates of a settled one). Pure data: :mod:`adapter.transaction.state` makes them, the
coordinator's :mod:`adapter.transaction.effects` writes them to Kafka.

Known gaps: none of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from adapter.transaction.half import Pending
from adapter.wire.records import EndTransaction

P = TypeVar("P")


@dataclass(frozen=True, slots=True)
class Commit(Generic[P]):
    """Deliver the half message to its real topic and write an OP COMMIT; when ``delivered``,
    the producer's own Kafka transaction delivered it (the fast path): only the OP record."""

    pending: Pending[P]
    end: EndTransaction
    delivered: bool = False
    copies: tuple[int, ...] = ()
    """Offsets of copies of the half message (one send stored twice) that the decision named
    before they were read: each gets an OP record of the same kind, so that they are known as
    decided when read, even by a successor after a crash."""
    search: bool = False
    """Its producer may have committed it directly: search its queue first, and deliver only
    if no copy is there (:mod:`adapter.transaction.direct`)."""


@dataclass(frozen=True, slots=True)
class Rollback(Generic[P]):
    """Write an OP ROLLBACK; nothing is delivered."""

    pending: Pending[P]
    end: EndTransaction
    copies: tuple[int, ...] = ()
    """As :attr:`Commit.copies`."""


@dataclass(frozen=True, slots=True)
class Check(Generic[P]):
    """Ask the producer group (check number ``pending.check_times``) and write an OP CHECK."""

    pending: Pending[P]


@dataclass(frozen=True, slots=True)
class Discard(Generic[P]):
    """Park the half message in ``TRANS_CHECK_MAX_TIME_TOPIC`` and write an OP DISCARD."""

    pending: Pending[P]
    reason: str


@dataclass(frozen=True, slots=True)
class Refuse:
    """An END record that is not applied, with the reason (logged and counted)."""

    end_offset: int
    end: EndTransaction | None
    reason: str


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A decision for a half message that was already resolved (counted, changes nothing)."""

    end_offset: int
    end: EndTransaction


Action = Commit[P] | Rollback[P] | Check[P] | Discard[P] | Refuse | Duplicate
