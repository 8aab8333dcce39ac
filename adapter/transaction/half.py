"""A half message as the coordinator's state knows it: who sent it, when, and its check clock.

Reproduces what RocketMQ's broker reads from a half message to decide on it
(``EndTransactionProcessor.checkPrepareMessage`` and ``TransactionalMessageServiceImpl``):
transaction id, producer group, born time and the
``CHECK_IMMUNITY_TIME_IN_SECONDS`` property (and, beyond RocketMQ, whether it may have been
committed directly); and a pending message's check count and due time.
:func:`half_info` is the one validation of a half message: the producer runs it before
sending one, and the coordinator when reading one, so that the two never disagree.

Known gaps: none of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from adapter import naming
from adapter import properties as prop
from adapter.transaction.half_state import HalfState
from adapter.transaction.timing import CLOCK_SKEW_ALLOWANCE_MS
from adapter.wire.records import EndTransaction, HalfMessage

__all__ = ["HalfInfo", "Pending", "half_info"]

P = TypeVar("P")


@dataclass(frozen=True, slots=True)
class HalfInfo:
    """What the state machine needs to know of a half message."""

    transaction_id: str
    producer_group: str
    born_ms: int
    immunity_ms: int | None = None
    """``CHECK_IMMUNITY_TIME_IN_SECONDS`` x 1000 when the message carries it."""
    copy_stamp: int | None = None
    """What tells a copy of this send from another send of the same transaction id, when the
    born time cannot (``COPY_STAMP``: a send retried through another proxy); else None."""
    direct_fence_ms: int | None = None
    """``DIRECT_FENCE``: its producer may commit it with one append to its queue, which lands
    and is readable within this long of the born time; else None."""

    @property
    def searchable_ms(self) -> int | None:
        """From when a search of its queue sees every direct append of it (None: it is not
        committed directly; :mod:`adapter.transaction.direct`)."""
        if self.direct_fence_ms is None:
            return None
        return self.born_ms + self.direct_fence_ms + CLOCK_SKEW_ALLOWANCE_MS

    @property
    def copy_key(self) -> tuple[str, str, int]:
        """Two half messages with one copy key are one send written twice."""
        stamp = self.born_ms if self.copy_stamp is None else self.copy_stamp
        return (self.transaction_id, self.producer_group, stamp)


@dataclass(slots=True)
class Pending(Generic[P]):
    """A half message waiting for its decision."""

    offset: int
    info: HalfInfo
    payload: P
    op_mark: int
    """The OP position from which every OP record about this message can be found."""
    check_times: int = 0
    due_ms: int = 0
    state: HalfState = HalfState.PREPARED
    held: tuple[int, EndTransaction] | None = None
    """A COMMIT read before a search of its queue could be final (END offset, decision):
    applied, with the search, at ``due_ms``."""


def half_info(half: HalfMessage) -> HalfInfo:
    """What the state machine needs of a half message; refuses one that can never be delivered
    or checked (a system topic, an invalid group)."""
    naming.sendable_kafka_topic(half.topic)
    naming.validate_group(half.producer_group)
    immunity: int | None = None
    raw = half.properties.get(prop.CHECK_IMMUNITY_TIME_IN_SECONDS)
    if raw is not None:
        try:
            immunity = max(0, int(raw)) * 1000
        except ValueError:
            immunity = None  # RocketMQ falls back to the transaction timeout
    stamp = half.properties.get(prop.COPY_STAMP)
    copy_stamp = int(stamp) if stamp is not None and stamp.isdecimal() else None
    fence = half.properties.get(prop.DIRECT_FENCE)
    direct = int(fence) if fence is not None and fence.isdecimal() else None
    return HalfInfo(
        half.transaction_id, half.producer_group, half.born_timestamp, immunity, copy_stamp, direct
    )
