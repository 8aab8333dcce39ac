"""The direct commit's rule: a committed message visible after one append, still exactly once.

Today a producer's COMMIT becomes visible when a Kafka transaction commits (the group commit,
:mod:`adapter.transaction.group_commit`): the real message and its END record go into one
transaction, and a read_committed reader sees the message after the flush, the commit and the
markers. The direct commit takes one round trip instead (issue 33's design step):

1. the producer appends the real message with its idempotent producer, stamped (CreateTime)
   with its half message's timestamp, to the queue chosen at half time;
2. once Kafka acknowledged it (acks=all: below the high watermark, visible), it writes its END
   record, marked delivered. A refused or unanswered append writes nothing: the decision is
   left UNKNOWN and the check-back settles it.

Kafka cannot fence an idempotent producer, so a direct append that a stalled broker or a dead
producer left in flight could land long after, for example after the coordinator delivered
the message itself. The **fence** bounds it in time instead: the real topic's
``message.timestamp.before.max.ms`` (B) makes its leader refuse a record stamped more than B
before its own clock. So a direct append stamped T lands, if ever, by broker time T + B, and is
below the high watermark (replicated, readable) within ``replica.lag.time.max.ms`` (R) more: an
in-sync follower catches up within R or leaves the ISR. With the clocks of brokers and
coordinators within ``CLOCK_SKEW_ALLOWANCE_MS`` (S), a read of the queue that starts at the
coordinator's time T + B + R + S or later sees every direct append of that message there will
ever be (:meth:`Fence.searchable_at`).

**The rule** (:func:`on_commit`): the coordinator records, without writing, a decision its
producer delivered, and any ROLLBACK. Any other COMMIT of a half message that may have been sent
directly (a check answer, a plain END) waits until the fence has passed, then searches the queue
from T on, read_committed, for the message's ``UNIQ_KEY``: found, it records it as delivered by
its producer; not found, it delivers it, once, as today (in its Kafka transaction with the
decision). A found copy can only be the direct one: the coordinator's own copies are written
with the decision that resolves the message, so it never searches after writing one.

The search costs a read of the queue from T, on a path taken only when a producer died or was
cut off between its append and its END; the direct path saves the flush, the commit and the
markers on every COMMIT. ``tests/unit/transaction/test_direct.py`` checks the rule on a model of
a queue, END and the clocks (stalled appends, dead producers, late ENDs, replication lag, skew).

The producer's side is :mod:`adapter.transaction.direct_commit`, the state applies the rule
(:mod:`adapter.transaction.state`) and the coordinator searches
(:mod:`adapter.transaction.direct_search`).

Known gaps: a topic qualifies only with CreateTime and a ``message.timestamp.before.max.ms``
of at most :data:`DIRECT_FENCE_MAX_MS` (:meth:`Fence.of`); others keep the group commit. A
record stamped by a clock more than B behind the broker's is refused, so a producer's clock
must agree with the brokers' within S (as the group commit's window already asks).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from adapter.transaction.timing import CLOCK_SKEW_ALLOWANCE_MS

__all__ = ["DIRECT_FENCE_MAX_MS", "Fence", "Step", "after_search", "on_commit"]

DIRECT_FENCE_MAX_MS = 5_000
"""The longest ``message.timestamp.before.max.ms`` a topic may have for direct commits: a
dead producer's COMMIT waits B + R + S before the coordinator may deliver it."""
_KAFKA_DEFAULT_REPLICA_LAG_MS = 30_000
_NO_FENCE = str(2**63 - 1)  # Kafka's default before.max: no record is too old


@dataclass(frozen=True)
class Fence:
    """How long after its stamp a direct append may still land and become readable."""

    before_max_ms: int
    """The real topic's ``message.timestamp.before.max.ms`` (B)."""
    replica_lag_ms: int
    """The brokers' ``replica.lag.time.max.ms`` (R)."""
    skew_ms: int = CLOCK_SKEW_ALLOWANCE_MS
    """How far the clocks of brokers and coordinators may disagree (S)."""

    @classmethod
    def of(cls, topic: Mapping[str, str], broker: Mapping[str, str]) -> Fence | None:
        """The fence of a topic with these configs on brokers with these, or None when the
        topic does not bound its appends in time (direct commits are then not used)."""
        if topic.get("message.timestamp.type", "CreateTime") != "CreateTime":
            return None  # LogAppendTime: the broker ignores the stamp
        before_max = int(topic.get("message.timestamp.before.max.ms", _NO_FENCE))
        if before_max > DIRECT_FENCE_MAX_MS:
            return None
        lag = int(broker.get("replica.lag.time.max.ms", _KAFKA_DEFAULT_REPLICA_LAG_MS))
        return cls(before_max, lag)

    @property
    def window_ms(self) -> int:
        """How long after its stamp a direct append may land and become readable (B + R):
        what a half message carries (``DIRECT_FENCE``)."""
        return self.before_max_ms + self.replica_lag_ms

    def searchable_at(self, stamped_ms: int) -> int:
        """From when (the coordinator's clock) a read of the queue sees every direct append
        stamped ``stamped_ms`` there will ever be."""
        return stamped_ms + self.window_ms + self.skew_ms


class Step(Enum):
    """What the coordinator does with a decision on a half message."""

    RECORD = "record"
    """Resolve it, write nothing: its producer delivered it, or it is rolled back."""
    DELIVER = "deliver"
    """Write the message to its queue with the decision (one Kafka transaction)."""
    WAIT = "wait"
    """Come back at :meth:`Fence.searchable_at`: a direct append may still land."""
    SEARCH = "search"
    """Read the queue from the stamp for the message; then :func:`after_search`."""


def on_commit(searchable_ms: int | None, now_ms: int, *, delivered: bool) -> Step:
    """The step for a COMMIT of a half message at the coordinator's ``now_ms``: ``delivered``
    when its producer wrote the message with it; ``searchable_ms`` is its
    :meth:`Fence.searchable_at`, None when it cannot have been committed directly."""
    if delivered:
        return Step.RECORD
    if searchable_ms is None:
        return Step.DELIVER
    if now_ms < searchable_ms:
        return Step.WAIT
    return Step.SEARCH


def after_search(found: bool) -> Step:
    """The step once the search of the queue has ended: a copy found is its producer's."""
    return Step.RECORD if found else Step.DELIVER
