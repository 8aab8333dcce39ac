"""The history of a chaos run: every client operation with its invoke and completion times and
its outcome, and every delivery a consumer saw.

Times are seconds on one monotonic clock (the run's). An operation whose call timed out or
failed in a way that leaves its effect unknown is ``UNKNOWN``: the checker then accepts it
delivered or not, and counts it "recovered" when it was. Thread-safe: many clients record into
one history.
"""

from __future__ import annotations

import enum
import threading
from dataclasses import dataclass, field


class Outcome(enum.Enum):
    OK = "ok"
    FAIL = "fail"
    """Known not to have taken effect (refused before anything was written)."""
    UNKNOWN = "unknown"
    """Timed out or cut: it may or may not have taken effect."""


class Kind(enum.Enum):
    SEND = "send"
    TRANSACTION = "transaction"
    DELAY = "delay"
    TIMER = "timer"
    RECALL = "recall"
    """A timer recalled right after its send: never delivered when the recall succeeded."""


@dataclass(frozen=True, slots=True)
class Operation:
    """One send, as its client saw it."""

    key: str
    """The message's identity, unique in the run (its body)."""
    kind: Kind
    invoked_s: float
    completed_s: float
    outcome: Outcome
    topic: str = ""
    """Where it was sent: the consumer groups of that topic must each get it."""
    committed: bool = True
    """False for what must never be delivered: a rolled-back transaction, a recalled timer."""
    due_s: float | None = None
    """A delayed message's or timer's earliest delivery time."""
    group: str | None = None
    """Its FIFO message group, if any; ``seq`` is its place in that group."""
    seq: int = 0


@dataclass(frozen=True, slots=True)
class Delivery:
    """One message a consumer received."""

    key: str
    at_s: float
    consumer: str
    """Which consumer group (each group must see each message once)."""


@dataclass(frozen=True, slots=True)
class Fault:
    """One fault's window: from its start until it was healed."""

    name: str
    started_s: float
    healed_s: float


@dataclass
class History:
    operations: list[Operation] = field(default_factory=list)
    deliveries: list[Delivery] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def sent(self, operation: Operation) -> None:
        with self._lock:
            self.operations.append(operation)

    def delivered(self, delivery: Delivery) -> None:
        with self._lock:
            self.deliveries.append(delivery)

    def faulted(self, fault: Fault) -> None:
        with self._lock:
            self.faults.append(fault)
