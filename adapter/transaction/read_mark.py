"""The check gate of one END partition: a read mark written to END and read back before a check.

Reproduces RocketMQ's rule that a half message is checked only once the op queue was read past
it (``TransactionalMessageServiceImpl.check``): here, before checking anything due at time t,
the coordinator writes a mark stamped t to END p in its transaction and reads it back,
read_committed. Every decision written before t, committed or still inside a producer's open
Kafka transaction, is then read before the check (see :mod:`adapter.transaction.coordinator`).

The gate lives with the partition's state, so a state rebuilt after a failed turn or a
takeover starts closed: a check waits until END was read again past a new mark, never on the
strength of a mark read before the rebuild (whose decisions the rebuild forgot).

Liveness: a mark that does not come back within ``reask_ms`` is asked for again, and the
caller logs and counts it. It comes back late while a producer's transaction is open on END p
(Kafka aborts a dead producer's within its timeout), and never from a consumer that stopped
fetching; a mark unanswered for ``give_up_ms`` tells the caller its consumer is stuck.
Pure: every input carries the time.

Known gaps: none of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

MARK_REASK_MS = 5_000
"""A mark not read back within this long is written again (a producer's open transaction on
END lasts at most its timeout: 5 s on the fast path, 10 s for a worker)."""
MARK_GIVE_UP_MS = 60_000
"""A mark unanswered this long means the consumer is not fetching: the turn fails, and the
worker reads its partitions again (and, if that keeps failing, replaces its consumer)."""


@dataclass(slots=True)
class ReadMark:
    """When a mark was last asked for, and how far marks were read back."""

    reask_ms: int = MARK_REASK_MS
    read_to_ms: int = -1
    """The stamp of the latest mark read back: END is read past every decision written before."""
    asked_ms: int | None = None
    """When the mark now awaited was written (None: none awaited)."""
    unanswered_since_ms: int | None = None
    """When the first of the marks awaited now was written."""
    reasks: int = 0
    """Marks written again because one did not come back (for the metric)."""

    def read(self, stamp_ms: int) -> None:
        """A mark stamped ``stamp_ms`` was read back from END."""
        self.read_to_ms = max(self.read_to_ms, stamp_ms)
        if self.asked_ms is not None and self.read_to_ms >= self.asked_ms:
            self.asked_ms = self.unanswered_since_ms = None

    def wanted(self, due_ms: int | None, now_ms: int) -> bool:
        """Whether to write a mark stamped ``now_ms``, for a check due at ``due_ms``: the first
        time one is needed, and again each ``reask_ms`` while none comes back."""
        if due_ms is None or due_ms > now_ms or self.read_to_ms >= due_ms:
            return False
        if self.asked_ms is not None:
            if now_ms - self.asked_ms < self.reask_ms:
                return False
            self.reasks += 1
        else:
            self.unanswered_since_ms = now_ms
        self.asked_ms = now_ms
        return True

    def waiting_ms(self, now_ms: int) -> int:
        """How long the marks awaited now have gone unanswered (0: none awaited)."""
        since = self.unanswered_since_ms
        return 0 if since is None else max(0, now_ms - since)

    def next_ask_ms(self) -> int | None:
        """When a mark is next asked for again if none comes back (None: none awaited)."""
        return None if self.asked_ms is None else self.asked_ms + self.reask_ms

    def blocks(self, due_ms: int) -> bool:
        """Whether a check due at ``due_ms`` waits for a mark: no use waking up for it."""
        return self.read_to_ms < due_ms
