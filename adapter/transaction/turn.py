"""One turn of the transaction coordinator: what it decided, and whether to apply it now.

Reproduces nothing of RocketMQ by itself: RocketMQ's broker writes each op message as it
handles the request. Here every applied turn is one Kafka transaction, which costs the broker a
dozen writes whatever it carries; so a turn holding only decisions that need nothing but their
OP record (:func:`may_wait`) stays open up to a linger and takes later decisions with it. A
turn with anything a user waits for (a delivery, a check, a parked record, a read mark) is
applied at once. Pure: the caller passes the monotonic time.

Known gaps: none of its own; the open turn lives in memory, and a crash before it is applied
only means the partitions' next owner decides it again from the last commit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from confluent_kafka import Message as KafkaRecord

from adapter.transaction.actions import Commit, Duplicate, Rollback
from adapter.transaction.state import Action


@dataclass(slots=True)
class Turn:
    """One transaction's work: effects to produce, and which partitions changed."""

    actions: list[tuple[int, Action[bytes]]] = field(default_factory=list)
    poison: list[tuple[KafkaRecord, str]] = field(default_factory=list)
    touched: set[int] = field(default_factory=set)
    marks: list[tuple[int, int]] = field(default_factory=list)
    """Read marks to write: (END partition, time)."""
    urgent: bool = False
    """Something in it must not wait: a delivery, a check, a park, a read mark."""
    opened_s: float | None = None
    """Monotonic time its first action that may wait was added."""

    def note(self, since: int, now_s: float) -> None:
        """Take account of the actions added from index ``since`` on."""
        added = self.actions[since:]
        if added and self.opened_s is None:
            self.opened_s = now_s
        self.urgent = (
            self.urgent
            or bool(self.poison or self.marks)
            or any(not may_wait(action) for _, action in added)
        )

    def drop(self, partitions: list[int]) -> None:
        """Forget what it holds for ``partitions`` (revoked: their next owner decides them
        again from the last commit, and parks again what it cannot read)."""
        gone = set(partitions)
        self.actions = [(p, action) for p, action in self.actions if p not in gone]
        self.poison = [(r, why) for r, why in self.poison if (r.partition() or 0) not in gone]
        self.marks = [(p, at) for p, at in self.marks if p not in gone]
        self.touched -= gone

    def due(self, now_s: float, linger_s: float, max_actions: int) -> bool:
        """Whether to apply it now."""
        if self.urgent or len(self.actions) >= max_actions:
            return True
        return self.opened_s is not None and now_s - self.opened_s >= linger_s


def may_wait(action: Action[bytes]) -> bool:
    """Only its OP record is to be written: the message is visible already, or never will be."""
    if isinstance(action, Commit):
        return action.delivered
    return isinstance(action, (Rollback, Duplicate))
