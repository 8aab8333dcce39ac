"""The direct commit's rule as a model: producers append their committed messages to the queue
themselves, the coordinator checks and delivers what is left, and each committed message is in
its queue once, each rolled back one never.

The model keeps the queue as the copies appended to it, each with the moment it becomes
readable (below the high watermark), and END as a log the coordinator reads in order. A
producer's direct append stays in flight for as long as the script says (a stalled broker, a cut
connection) and is appended only if the broker's clock is within B of its stamp; a producer
dies at any moment, its appends still in flight, its END records and acknowledgements lost;
replication takes up to R; the broker's and the coordinator's clocks disagree within S. The
coordinator follows :func:`~adapter.transaction.direct.on_commit`."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from adapter.transaction.direct import DIRECT_FENCE_MAX_MS, Fence, Step, after_search, on_commit

B, R, S = 800, 600, 200
"""The model's fence (ms): before.max, replication lag, clock skew."""
FENCE = Fence(B, R, S)
CHECK_AFTER_MS = 300
CHECK_INTERVAL_MS = 1_000
COMMIT, ROLLBACK = "COMMIT", "ROLLBACK"


@dataclass
class Append:
    """A direct append in flight: whose (the producer's life), and how long it will replicate."""

    half: int
    life: int
    lag_ms: int


@dataclass
class Model:
    fence: Fence
    broker_skew_ms: int
    coordinator_skew_ms: int
    now: int = 0
    """True time; each party reads its own clock off it."""
    stamps: list[int] = field(default_factory=list)
    """Each half message's stamp: its timestamp in HALF (the broker's clock)."""
    truth: dict[int, str] = field(default_factory=dict)
    """What each local transaction decided (the application's database)."""
    life: int = 0
    """The producer's current life; a crash starts the next one."""
    appends: list[Append] = field(default_factory=list)
    acks: list[tuple[int, int, int]] = field(default_factory=list)
    """Acknowledged appends (half, life, readable from): the producer's END once readable."""
    ends: list[tuple[int, str, bool]] = field(default_factory=list)
    """END records in flight: (half, decision, delivered by its producer)."""
    end_log: list[tuple[int, str, bool]] = field(default_factory=list)
    queue: list[tuple[int, int, str]] = field(default_factory=list)
    """Copies in the real queue: (half, readable from, who wrote it)."""
    read: int = 0
    resolved: set[int] = field(default_factory=set)
    due: dict[int, int] = field(default_factory=dict)
    """The next check of each half (the coordinator's clock)."""
    waiting: set[int] = field(default_factory=set)
    """Halves whose COMMIT waits for the fence."""

    def broker_now(self) -> int:
        return self.now + self.broker_skew_ms

    def coordinator_now(self) -> int:
        return self.now + self.coordinator_skew_ms

    # -- the producer -------------------------------------------------------------------------

    def send(self) -> None:
        self.stamps.append(self.broker_now())
        self.due[len(self.stamps) - 1] = self.stamps[-1] + CHECK_AFTER_MS

    def decide(self, index: int, decision: str, lag_ms: int) -> None:
        """A local transaction ends: COMMIT appends directly, ROLLBACK sends its END."""
        undecided = [h for h in range(len(self.stamps)) if h not in self.truth]
        if not undecided:
            return
        half = undecided[index % len(undecided)]
        self.truth[half] = decision
        if decision == COMMIT:
            self.appends.append(Append(half, self.life, lag_ms))
        else:
            self.ends.append((half, ROLLBACK, False))

    def land(self, index: int) -> None:
        """A direct append in flight reaches the leader: appended if its stamp is within B of
        the broker's clock (``message.timestamp.before.max.ms``), else refused."""
        if not self.appends:
            return
        append = self.appends.pop(index % len(self.appends))
        if self.broker_now() - self.stamps[append.half] > self.fence.before_max_ms:
            return  # refused: its producer, if alive, leaves the decision UNKNOWN
        readable = self.now + append.lag_ms
        self.queue.append((append.half, readable, "producer"))
        self.acks.append((append.half, append.life, readable))

    def acknowledge(self) -> None:
        """acks=all: the producer hears of an append once it is readable, then sends END."""
        ready = [a for a in self.acks if a[2] <= self.now]
        self.acks = [a for a in self.acks if a[2] > self.now]
        for half, life, _ in ready:
            if life == self.life:
                self.ends.append((half, COMMIT, True))

    def send_end(self) -> None:
        if self.ends:
            self.end_log.append(self.ends.pop(0))

    def crash(self) -> None:
        """The producer dies: its appends stay in flight, its ENDs and acks are lost, and the
        local transactions it had not finished never commit."""
        self.life += 1
        self.ends = []
        for half in range(len(self.stamps)):
            self.truth.setdefault(half, ROLLBACK)

    def tick(self, ms: int) -> None:
        self.now += ms

    # -- the coordinator ----------------------------------------------------------------------

    def coordinate(self) -> None:
        while self.read < len(self.end_log):
            half, decision, delivered = self.end_log[self.read]
            self.read += 1
            if half not in self.resolved:
                self.apply(half, decision, delivered)
        for half in sorted(self.waiting):
            self.waiting.discard(half)
            self.apply(half, COMMIT, False)
        for half, due in sorted(self.due.items()):
            if half in self.resolved or half in self.waiting or due > self.coordinator_now():
                continue
            answer = self.truth.get(half)  # the checker asks the database
            if answer is None:
                self.due[half] = self.coordinator_now() + CHECK_INTERVAL_MS
            else:
                self.end_log.append((half, answer, False))

    def apply(self, half: int, decision: str, delivered: bool) -> None:
        if decision == ROLLBACK:
            self.resolved.add(half)
            return
        searchable = self.fence.searchable_at(self.stamps[half])
        step = on_commit(searchable, self.coordinator_now(), delivered=delivered)
        if step is Step.SEARCH:  # read_committed, up to the high watermark
            found = any(h == half and at <= self.now for h, at, _ in self.queue)
            step = after_search(found)
        if step is Step.WAIT:
            self.waiting.add(half)
            return
        if step is Step.DELIVER:  # in the coordinator's transaction with the decision
            self.queue.append((half, self.now, "coordinator"))
        self.resolved.add(half)

    # -- what must hold -----------------------------------------------------------------------

    def copies(self, half: int) -> int:
        return sum(1 for h, _, _ in self.queue if h == half)

    def check_never_twice(self) -> None:
        for half in range(len(self.stamps)):
            assert self.copies(half) <= 1, f"half {half} twice: {self.queue}"
            if self.truth.get(half) == ROLLBACK:
                assert self.copies(half) == 0, f"rolled back half {half} delivered"

    def settle(self) -> None:
        """The producer dies, every append in flight lands or is refused, and time runs until
        the coordinator has resolved every half message."""
        self.crash()
        while self.appends:
            self.land(0)
        for _ in range(40):
            self.acknowledge()
            self.coordinate()
            self.tick(250)
        self.coordinate()


def play(script: list[tuple], fence: Fence = FENCE, broker: int = 0, coordinator: int = 0) -> Model:  # type: ignore[type-arg]
    model = Model(fence, broker, coordinator)
    for step in script:
        getattr(model, step[0])(*step[1:])
        model.check_never_twice()
    model.settle()
    model.check_never_twice()
    assert model.resolved == set(range(len(model.stamps))), "every half message resolved"
    for half, decision in model.truth.items():
        assert model.copies(half) == (1 if decision == COMMIT else 0), (half, model.queue)
    return model


# The producer dies between its append and its END: the check-back answers COMMIT, and the
# coordinator finds the producer's copy rather than writing a second.
DIES_AFTER_APPEND = [
    ("send",),
    ("decide", 0, COMMIT, 100),
    ("land", 0),
    ("crash",),
    ("tick", 400),
    ("coordinate",),
    ("coordinate",),
]
# The append is stalled in the broker past the fence: refused; the check-back delivers it.
STALLED_APPEND = [
    ("send",),
    ("decide", 0, COMMIT, 0),
    ("tick", B + 50),
    ("land", 0),
    ("tick", 2_000),
    ("coordinate",),
    ("coordinate",),
]
# The producer's END (delivered) comes after the check answer: nothing more is written.
LATE_END = [
    ("send",),
    ("decide", 0, COMMIT, 0),
    ("land", 0),
    ("acknowledge",),
    ("tick", 400),
    ("coordinate",),
    ("tick", B + R + S),
    ("coordinate",),
    ("send_end",),
    ("coordinate",),
]
# The append still replicates when the check answer comes: the coordinator waits for the fence.
REPLICATING = [
    ("send",),
    ("decide", 0, COMMIT, R),
    ("tick", B),
    ("land", 0),
    ("crash",),
    ("tick", S + 1),
    ("coordinate",),
    ("coordinate",),
]
# A rollback whose END is lost: the check-back rolls it back; nothing is written.
LOST_ROLLBACK = [("send",), ("decide", 0, ROLLBACK, 0), ("crash",), ("tick", 400), ("coordinate",)]
# The producer dies before its local transaction ends: the database has nothing, ROLLBACK.
DIES_UNDECIDED = [("send",), ("crash",), ("tick", 400), ("coordinate",)]


@pytest.mark.parametrize(
    "script",
    [DIES_AFTER_APPEND, STALLED_APPEND, LATE_END, REPLICATING, LOST_ROLLBACK, DIES_UNDECIDED],
    ids=[
        "dies-after-append",
        "stalled-append",
        "late-end",
        "replicating",
        "lost-rollback",
        "undecided",
    ],
)
def test_each_interleaving_of_producer_death_and_check_delivers_once(script: list[tuple]) -> None:  # type: ignore[type-arg]
    play(script)


def test_a_commit_whose_append_may_still_land_waits_for_the_fence() -> None:
    stamped = 10_000
    searchable = FENCE.searchable_at(stamped)
    assert searchable == stamped + B + R + S
    assert on_commit(searchable, searchable - 1, delivered=False) is Step.WAIT
    assert on_commit(searchable, searchable, delivered=False) is Step.SEARCH
    assert on_commit(searchable, stamped, delivered=True) is Step.RECORD
    assert on_commit(None, stamped, delivered=False) is Step.DELIVER
    assert after_search(True) is Step.RECORD
    assert after_search(False) is Step.DELIVER


def test_a_search_that_forgets_replication_delivers_twice() -> None:
    """The model can fail: without R in the fence, the search runs while the producer's copy
    is appended but not yet readable, and the coordinator writes a second."""
    with pytest.raises(AssertionError, match="twice"):
        play(REPLICATING, fence=Fence(B, 0, S))


def test_a_search_that_forgets_the_clock_skew_delivers_twice() -> None:
    """A coordinator clock ahead of the broker's by S: without S, it searches before an
    append that landed at the last moment is readable."""
    script = [
        ("send",),
        ("decide", 0, COMMIT, R),
        ("tick", B),
        ("land", 0),
        ("crash",),
        ("tick", R - S + 1),
        ("coordinate",),
        ("coordinate",),
    ]
    with pytest.raises(AssertionError, match="twice"):
        play(script, fence=Fence(B, R, 0), broker=-S, coordinator=0)
    play(script, broker=-S // 2, coordinator=S // 2)


def test_only_a_topic_that_bounds_its_appends_in_time_is_fenced() -> None:
    fenced = {"message.timestamp.type": "CreateTime", "message.timestamp.before.max.ms": "5000"}
    assert Fence.of(fenced, {"replica.lag.time.max.ms": "10000"}) == Fence(5_000, 10_000)
    assert Fence.of(fenced, {}) == Fence(5_000, 30_000)
    assert Fence.of({}, {}) is None, "Kafka's default: any stamp is accepted"
    too_long = {**fenced, "message.timestamp.before.max.ms": str(DIRECT_FENCE_MAX_MS + 1)}
    assert Fence.of(too_long, {}) is None
    assert Fence.of({**fenced, "message.timestamp.type": "LogAppendTime"}, {}) is None


steps = st.lists(
    st.one_of(
        st.just(("send",)),
        st.tuples(
            st.just("decide"),
            st.integers(0, 5),
            st.sampled_from([COMMIT, ROLLBACK]),
            st.sampled_from([0, 1, R // 2, R]),
        ),
        st.tuples(st.just("land"), st.integers(0, 5)),
        st.just(("acknowledge",)),
        st.just(("send_end",)),
        st.just(("crash",)),
        st.just(("coordinate",)),
        st.tuples(
            st.just("tick"),
            st.sampled_from([1, 50, 299, 300, 301, B - 1, B, B + 1, R, B + R, B + R + S, 2_000]),
        ),
    ),
    max_size=50,
)
half_skew = st.integers(-S // 2, S // 2)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@example(DIES_AFTER_APPEND, S // 2, -S // 2)
@example(REPLICATING, -S // 2, S // 2)
@example(STALLED_APPEND, -S // 2, S // 2)
@given(steps, half_skew, half_skew)
def test_every_committed_message_is_in_its_queue_once_and_no_rolled_back_one(
    script: list[tuple],  # type: ignore[type-arg]
    broker_skew_ms: int,
    coordinator_skew_ms: int,
) -> None:
    play(script, broker=broker_skew_ms, coordinator=coordinator_skew_ms)
