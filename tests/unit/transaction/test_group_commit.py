"""The fast path's protocol as a model: producers commit their own decisions in Kafka
transactions, the coordinator checks what is due, and no message is delivered twice or lost.

The model keeps END as a log of records with their Kafka transaction, and reads it the way a
read_committed consumer does: never past the first record of an open transaction (the last
stable offset), skipping aborted ones. The producer follows group_commit's rules (commit only
before the earliest write-by time, else abort and send the decisions the plain way); the
coordinator follows the coordinator's (read marks, then :class:`PartitionState`'s decisions).
Producers crash mid-group, clocks disagree within the allowance, and time jumps at random."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from adapter.transaction.config import CheckPolicy
from adapter.transaction.state import Check, Commit, Discard, HalfInfo, PartitionState
from adapter.transaction.timing import (
    CLOCK_SKEW_ALLOWANCE_MS,
    FAST_COMMIT_TRANSACTION_TIMEOUT_MS,
    FAST_COMMIT_WINDOW_MS,
)
from adapter.wire.records import EndTransaction, TransactionDecision

POLICY = CheckPolicy(transaction_timeout_ms=500, check_interval_ms=3_000, check_max=50)
GROUP = "PG_ORDERS"
COMMIT, ROLLBACK = TransactionDecision.COMMIT, TransactionDecision.ROLLBACK


@dataclass
class Entry:
    """A record of END: a decision (``delivered``: its real message is in the same Kafka
    transaction) or a coordinator's read mark stamped ``mark_ms``."""

    end: EndTransaction | None
    txn: int | None
    delivered: bool = False
    mark_ms: int = 0


@dataclass
class Model:
    skew_ms: int
    now: int = 0
    born: list[int] = field(default_factory=list)
    truth: dict[int, TransactionDecision] = field(default_factory=dict)
    """What each local transaction decided (the application's database)."""
    log: list[Entry] = field(default_factory=list)
    txns: dict[int, str] = field(default_factory=dict)
    txn_started: dict[int, int] = field(default_factory=dict)
    group: list[int] = field(default_factory=list)
    unsent: list[Entry] = field(default_factory=list)
    """Records handed to the producer client, not yet appended (in flight)."""
    open_txn: int | None = None
    delivered: dict[int, int] = field(default_factory=dict)
    pending_by_txn: dict[int, list[int]] = field(default_factory=dict)
    read: int = 0
    half_read: int = 0
    mark_read: int = -1
    mark_asked: int = -1
    checks: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.state: PartitionState[int] = PartitionState(
            POLICY, half_start=0, end_start=0, op_start=0
        )

    # -- the producer -------------------------------------------------------------------------

    def producer_now(self) -> int:
        return self.now + self.skew_ms

    def send(self) -> None:
        self.born.append(self.producer_now())

    def decide(self, index: int, decision: TransactionDecision) -> None:
        undecided = [h for h in range(len(self.born)) if h not in self.truth]
        if not undecided:
            return
        half = undecided[index % len(undecided)]
        self.truth[half] = decision
        if self.open_txn is None:
            self.open_txn = len(self.txns)
            self.txns[self.open_txn] = "open"
            self.txn_started[self.open_txn] = self.now
        delivered = decision is COMMIT
        if delivered:
            self.pending_by_txn.setdefault(self.open_txn, []).append(half)
        self.unsent.append(Entry(self.end(half, decision, False), self.open_txn, delivered))
        self.group.append(half)

    def send_records(self) -> None:
        """The client's records reach the broker (any time before the flush of a commit)."""
        self.log += self.unsent
        self.unsent = []

    def commit_group(self) -> None:
        """group_commit's rule: commit only if every record was acknowledged (here: appended)
        before the earliest write-by time, else abort and send the decisions the plain way."""
        txn, group = self.open_txn, self.group
        if txn is None:
            return
        self.send_records()  # the flush: every record acknowledged before the deadline check
        self.open_txn, self.group = None, []
        if self.txns[txn] != "open":  # the broker aborted it already
            self.fall_back(group)
            return
        write_by = min(self.born[h] for h in group) + FAST_COMMIT_WINDOW_MS
        if self.producer_now() < write_by:
            self.txns[txn] = "committed"
            for half in self.pending_by_txn.pop(txn, []):
                self.delivered[half] = self.delivered.get(half, 0) + 1
        else:
            self.txns[txn] = "aborted"
            self.fall_back(group)

    def fall_back(self, group: list[int]) -> None:
        for half in group:
            self.log.append(Entry(self.end(half, self.truth[half], False), None))

    def crash_producer(self) -> None:
        """The open transaction stays open until the broker's timeout aborts it."""
        self.open_txn, self.group, self.unsent = None, [], []

    def answer_checks(self) -> None:
        for half in self.checks:
            decision = self.truth.get(half, TransactionDecision.UNKNOWN)
            self.log.append(Entry(self.end(half, decision, True), None))
        self.checks = []

    def end(self, half: int, decision: TransactionDecision, from_check: bool) -> EndTransaction:
        return EndTransaction(
            transaction_id=f"t{half}",
            producer_group=GROUP,
            half_partition=0,
            half_offset=half,
            decision=decision,
            from_check=from_check,
            timestamp=0,
        )

    # -- the broker ---------------------------------------------------------------------------

    def tick(self, ms: int) -> None:
        self.now += ms
        for txn, status in self.txns.items():
            if (
                status == "open"
                and self.now - self.txn_started[txn] > FAST_COMMIT_TRANSACTION_TIMEOUT_MS
            ):
                self.txns[txn] = "aborted"
                self.pending_by_txn.pop(txn, None)

    def stable_end(self) -> int:
        """The last stable offset: the first record of a transaction still open."""
        for offset, entry in enumerate(self.log):
            if entry.txn is not None and self.txns[entry.txn] == "open":
                return offset
        return len(self.log)

    # -- the coordinator ----------------------------------------------------------------------

    def coordinate(self) -> None:
        while self.half_read < len(self.born):
            info = HalfInfo(f"t{self.half_read}", GROUP, self.born[self.half_read])
            self.apply(self.state.half(self.half_read, info, self.half_read, self.now))
            self.half_read += 1
        stable = self.stable_end()
        while self.read < stable:
            entry = self.log[self.read]
            if entry.txn is not None and self.txns[entry.txn] == "aborted":
                self.state.skip_end(self.read)
            elif entry.end is None:
                self.state.skip_end(self.read)
                self.mark_read = max(self.mark_read, entry.mark_ms)
            else:
                delivered = entry.delivered
                self.apply(self.state.end(self.read, entry.end, self.now, delivered=delivered))
            self.read += 1
        due = self.state.next_due_ms()
        if due is not None and due <= self.now and self.mark_read < due and self.mark_asked < due:
            self.log.append(Entry(None, None, mark_ms=self.now))
            self.mark_asked = self.now
        self.apply(self.state.due(self.now, 100, self.mark_read))

    def apply(self, actions: list) -> None:  # type: ignore[type-arg]
        for action in actions:
            if isinstance(action, Commit) and not action.delivered:
                half = action.pending.offset
                self.delivered[half] = self.delivered.get(half, 0) + 1
            elif isinstance(action, Check):
                self.checks.append(action.pending.offset)
            elif isinstance(action, Discard):
                raise AssertionError(f"half {action.pending.offset} discarded: {action.reason}")


steps = st.lists(
    st.one_of(
        st.just(("send",)),
        st.tuples(st.just("decide"), st.integers(0, 5), st.sampled_from([COMMIT, ROLLBACK])),
        st.just(("commit_group",)),
        st.just(("send_records",)),
        st.just(("crash_producer",)),
        st.just(("coordinate",)),
        st.just(("answer_checks",)),
        st.tuples(
            st.just("tick"),
            st.sampled_from([1, 100, 499, 500, 501, 600, 999, 1_000, 1_499, 1_500, 2_000, 6_000]),
        ),
    ),
    max_size=60,
)

# A group acknowledged just inside the window, committed while a check would be due: the
# coordinator must not check until the transaction is settled.
SLOW_GROUP = [
    ("send",),
    ("decide", 0, COMMIT),
    ("tick", 1_499),
    ("send_records",),
    ("coordinate",),
    ("tick", 1_000),
    ("coordinate",),
    ("commit_group",),
    ("coordinate",),
    ("answer_checks",),
]
# A decision whose records reach the broker late, after a check was answered: the group must
# not commit (its deadline passed), or the message would be delivered twice.
LATE_RECORDS = [
    ("send",),
    ("decide", 0, COMMIT),
    ("tick", 2_000),
    ("coordinate",),
    ("coordinate",),
    ("answer_checks",),
    ("commit_group",),
]
# A check answered inside the window, before the group's records arrive: the coordinator must
# not check before the window (and the clock skew allowance) is over.
EARLY_CHECK = [
    ("send",),
    ("decide", 0, COMMIT),
    ("tick", 600),
    ("coordinate",),
    ("coordinate",),
    ("answer_checks",),
    ("commit_group",),
]
# A producer dies with its group open; the broker aborts it and the check-back commits.
DEAD_PRODUCER = [("send",), ("decide", 0, COMMIT), ("crash_producer",), ("tick", 6_000)]


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(SLOW_GROUP, -CLOCK_SKEW_ALLOWANCE_MS)
@example(SLOW_GROUP, CLOCK_SKEW_ALLOWANCE_MS)
@example(DEAD_PRODUCER, 0)
@example(LATE_RECORDS, 0)
@example(EARLY_CHECK, 0)
@given(steps, st.integers(-CLOCK_SKEW_ALLOWANCE_MS, CLOCK_SKEW_ALLOWANCE_MS))
def test_every_committed_local_transaction_is_delivered_once_and_no_other(
    script: list[tuple],
    skew_ms: int,  # type: ignore[type-arg]
) -> None:
    model = Model(skew_ms)
    for step in script:
        getattr(model, step[0])(*step[1:])
        assert all(count == 1 for count in model.delivered.values()), model.delivered
    # Then the producer commits what it holds, undecided local transactions commit, and time
    # runs until every check is answered.
    model.commit_group()
    for half in range(len(model.born)):
        model.truth.setdefault(half, COMMIT)
    for _ in range(20):
        model.coordinate()
        model.answer_checks()
        model.tick(POLICY.check_interval_ms)
    model.coordinate()

    assert model.state.pending_count == 0
    committed = {h for h, decision in model.truth.items() if decision is COMMIT}
    assert model.delivered == dict.fromkeys(committed, 1)
