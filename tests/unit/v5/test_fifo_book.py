"""The FIFO book on a manual clock: one message group's records one at a time and in order,
a failing record holding back its own group only, attempts up by one per lapse, dead letters
past the max attempts, commits never past an un-acked record; and a stateful model of it all."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    rule,
)

from adapter.clock import ManualClock
from adapter.v5.exception import BadRequestException
from adapter.v5.fifo_book import FifoBook, Handed, State
from adapter.v5.fifo_note import MAX_CHARS, Carried, decode, encode
from adapter.v5.invisibility import ILLEGAL_INVISIBLE_TIME, INVALID_RECEIPT_HANDLE

pytestmark = pytest.mark.timeout(120)

P = ("Topic", 0)


def book_with(*groups: str | None, clock: ManualClock, max_attempts: int = 3) -> FifoBook[str]:
    book: FifoBook[str] = FifoBook(clock, max_attempts)
    for offset, group in enumerate(groups):
        book.add(P, offset, group, f"{group}{offset}")
    return book


def records(entries: list) -> list[str]:
    return [entry.record for entry in entries]


def a0_held_and_group_b_acked(clock: ManualClock) -> tuple[FifoBook[str], Handed[str]]:
    """A book of A0, A1, B2, B3 whose A0 is held (5 s) and whose group B is acked."""
    book = book_with("A", "A", "B", "B", clock=clock)
    a0, b2 = book.take(10, 5)
    book.ack(b2.handle)
    [b3] = book.take(10, 5)
    book.ack(b3.handle)
    return book, a0


def test_a_message_group_gives_its_next_record_only_once_the_one_before_is_acked() -> None:
    clock = ManualClock()
    book = book_with("A", "A", "B", clock=clock)

    first = book.take(10, 5)
    assert records(first) == ["A0", "B2"]
    assert book.take(10, 5) == []
    book.ack(first[0].handle)

    assert records(book.take(10, 5)) == ["A1"]


def test_records_without_a_message_group_are_handed_out_together() -> None:
    book = book_with(None, None, "A", "A", None, clock=ManualClock())

    assert records(book.take(10, 5)) == ["None0", "None1", "A2", "None4"]


def test_a_lapsed_record_comes_back_first_with_attempt_two_and_holds_back_only_its_group() -> None:
    clock = ManualClock()
    book, a0 = a0_held_and_group_b_acked(clock)

    clock.advance(5_000)

    [again] = book.take(10, 5)
    assert (again.record, again.attempt) == ("A0", 2)
    with pytest.raises(BadRequestException) as refused:
        book.ack(a0.handle)  # the first delivery's handle lapsed
    assert refused.value.code == INVALID_RECEIPT_HANDLE
    assert book.committable(P) == 0
    book.ack(again.handle)
    assert records(book.take(10, 5)) == ["A1"]
    assert book.committable(P) == 1


def test_past_the_max_attempts_a_record_is_dead_and_its_group_goes_on_once_it_is_buried() -> None:
    clock = ManualClock()
    book = book_with("A", "A", clock=clock, max_attempts=2)
    book.take(1, 1)
    clock.advance(1_000)
    [second] = book.take(1, 1)
    assert second.attempt == 2
    clock.advance(1_000)

    [dead] = book.expire()

    assert (dead.record, dead.state, dead.attempt) == ("A0", State.DEAD, 2)
    assert "delivered 2 times" in dead.reason
    assert book.take(10, 1) == []  # still holds its group while it is moved
    book.buried(dead)
    assert records(book.take(10, 1)) == ["A1"]
    assert book.committable(P) == 1


def test_change_to_zero_gives_the_record_back_at_once_with_the_next_attempt() -> None:
    clock = ManualClock()
    book = book_with("A", clock=clock)
    [first] = book.take(1, 30)

    book.change(first.handle, 0)

    [again] = book.take(1, 30)
    assert again.attempt == 2
    with pytest.raises(BadRequestException):
        book.change(first.handle, 10)


def test_an_invisible_duration_out_of_range_is_refused() -> None:
    book = book_with("A", clock=ManualClock())
    [held] = book.take(1, 5)

    with pytest.raises(BadRequestException) as refused:
        book.change(held.handle, 13 * 3600)
    assert refused.value.code == ILLEGAL_INVISIBLE_TIME


def test_a_dropped_partition_invalidates_its_handles_and_commits_nothing_more() -> None:
    book = book_with("A", "B", clock=ManualClock())
    held = book.take(10, 5)

    assert book.drop(P) == 2

    assert book.committable(P) is None
    for entry in held:
        with pytest.raises(BadRequestException):
            book.ack(entry.handle)


def test_a_forwarded_record_is_dead_at_once() -> None:
    book = book_with("A", "A", clock=ManualClock())
    [held] = book.take(1, 5)

    book.forward(held.handle, "failed 16 times in the push consumer")

    [dead] = book.expire()
    assert dead.reason == "failed 16 times in the push consumer"
    book.buried(dead)
    assert records(book.take(1, 5)) == ["A1"]


def test_a_filtered_record_is_done_at_once_and_commits_move_past_it() -> None:
    book = book_with(clock=ManualClock())
    book.passed(P, 0)
    book.passed(P, 1)

    assert book.committable(P) == 2
    assert book.take(10, 5) == []


def test_the_next_owner_of_a_partition_keeps_its_acks_attempts_and_invisible_durations() -> None:
    clock = ManualClock()
    before, _a0 = a0_held_and_group_b_acked(clock)
    position, note = before.committable(P), before.note(P)
    after: FifoBook[str] = FifoBook(clock, 3)

    after.restore(P, position, note)
    for offset, group in enumerate(["A", "A", "B", "B"]):
        after.add(P, offset, group, f"{group}{offset}")

    assert (position, after.take(10, 5)) == (0, [])  # A0 is still held; B2 and B3 are done
    clock.advance(5_000)
    [again] = after.take(10, 5)
    assert (again.record, again.attempt) == ("A0", 2)
    after.ack(again.handle)
    [a1] = after.take(10, 5)
    after.ack(a1.handle)
    assert after.committable(P) == 4


def test_a_note_says_the_done_offsets_and_attempts_relative_to_the_position() -> None:
    note = encode(100, [102, 103, 104, 107], [(100, 2, None), (101, 1, 1_700_000_000_000)])

    assert note == "f1|2-4,7|0=2,1=1@1700000000000"
    carried = decode(100, note)
    assert carried.done == {102, 103, 104, 107}
    assert carried.used == {100: (2, None), 101: (1, 1_700_000_000_000)}
    assert decode(5, "not a note") == decode(5, "f1|x|") == decode(5, "") == Carried()


def test_a_note_too_long_loses_its_last_items() -> None:
    note = encode(0, range(1, 4000, 2), [])

    assert len(note) <= MAX_CHARS
    assert decode(0, note).done == set(range(1, 2 * len(decode(0, note).done), 2))


# -- the model ---------------------------------------------------------------------------------

MAX_ATTEMPTS = 3
PARTITIONS = (0, 1)
GROUPS = ("A", "B", "C", None)


@dataclass
class Rec:
    group: str | None
    state: str = "waiting"
    attempt: int = 0
    """The last attempt handed out (0: never)."""
    not_before: float = 0.0
    """Held by the partition's previous owner until then."""


@dataclass
class Held:
    key: tuple[int, int]
    deadline: float


class FifoBookMachine(RuleBasedStateMachine):
    """Adds, takes, acks, changes, forwards, lapses, dead letters and rebalances against a model
    of what RocketMQ's FIFO pop promises."""

    handles = Bundle("handles")

    @initialize()
    def start(self) -> None:
        self.clock = ManualClock()
        self.book: FifoBook[tuple[int, int]] = FifoBook(self.clock, MAX_ATTEMPTS)
        self.next = dict.fromkeys(PARTITIONS, 0)
        self.recs: dict[tuple[int, int], Rec] = {}
        self.held: dict[str, Held] = {}

    # -- the model's own view ---------------------------------------------------------------

    def lapse(self) -> None:
        now = self.clock.monotonic()
        for handle, held in list(self.held.items()):
            if held.deadline <= now:
                del self.held[handle]
                rec = self.recs[held.key]
                rec.state = "dead" if rec.attempt >= MAX_ATTEMPTS else "waiting"

    def ready(self) -> set[tuple[int, int]]:
        out = set()
        for p in PARTITIONS:
            blocked: set[str] = set()
            for key in sorted(k for k in self.recs if k[0] == p):
                rec = self.recs[key]
                if rec.state == "done":
                    continue
                if rec.group is not None:
                    if rec.group in blocked:
                        continue
                    blocked.add(rec.group)
                if rec.state == "waiting" and rec.not_before <= self.clock.monotonic():
                    out.add(key)
        return out

    def finish(self, key: tuple[int, int]) -> None:
        self.recs[key].state = "done"

    # -- rules ------------------------------------------------------------------------------

    @rule(p=st.sampled_from(PARTITIONS), group=st.sampled_from(GROUPS), gap=st.integers(1, 2))
    def add(self, p: int, group: str | None, gap: int) -> None:
        offset = self.next[p] + gap - 1
        self.next[p] = offset + 1
        self.book.add(p, offset, group, (p, offset))
        self.recs[(p, offset)] = Rec(group)

    @rule(target=handles, n=st.integers(1, 4), invisible=st.integers(0, 5))
    def take(self, n: int, invisible: int) -> object:
        self.lapse()
        ready = self.ready()
        taken = self.book.take(n, invisible)
        assert len(taken) == min(n, len(ready)), "a record that may go was kept back"
        for entry in taken:
            key = entry.record
            assert key in ready, f"{key} handed out while an earlier one of its group is not done"
            rec = self.recs[key]
            assert entry.attempt == rec.attempt + 1 <= MAX_ATTEMPTS
            rec.attempt, rec.state = entry.attempt, "held"
            self.held[str(entry.handle)] = Held(key, self.clock.monotonic() + invisible)
        return [str(entry.handle) for entry in taken]

    @rule(handles=consumes(handles), pick=st.integers(0, 3))
    def ack(self, handles: list[str], pick: int) -> None:
        if not handles:
            return
        handle = handles[pick % len(handles)]
        self.lapse()
        held = self.held.pop(handle, None)
        if held is None:
            with pytest.raises(BadRequestException):
                self.book.ack(handle)
            return
        assert self.book.ack(handle).record == held.key
        self.finish(held.key)

    @rule(handles=handles, pick=st.integers(0, 3), seconds=st.integers(0, 5))
    def change(self, handles: list[str], pick: int, seconds: int) -> None:
        if not handles:
            return
        handle = handles[pick % len(handles)]
        self.lapse()
        held = self.held.get(handle)
        if held is None:
            with pytest.raises(BadRequestException):
                self.book.change(handle, seconds)
            return
        self.book.change(handle, seconds)
        held.deadline = self.clock.monotonic() + seconds

    @rule(handles=consumes(handles))
    def forward(self, handles: list[str]) -> None:
        if not handles:
            return
        self.lapse()
        held = self.held.pop(handles[0], None)
        if held is None:
            with pytest.raises(BadRequestException):
                self.book.forward(handles[0], "forwarded")
            return
        self.book.forward(handles[0], "forwarded")
        self.recs[held.key].state = "dead"

    @rule(ms=st.integers(0, 4_000))
    def tick(self, ms: int) -> None:
        self.clock.advance(ms)

    @rule(bury=st.booleans())
    def dead_letters(self, bury: bool) -> None:
        self.lapse()
        dead = self.book.expire()
        assert {e.record for e in dead} == {k for k, r in self.recs.items() if r.state == "dead"}
        for entry in dead:
            assert entry.state is State.DEAD
            if bury:
                self.book.buried(entry)
                self.finish(entry.record)

    @rule(p=st.sampled_from(PARTITIONS))
    def rebalance(self, p: int) -> None:
        """The partition is revoked and assigned again (to this or another consumer): fetched
        anew from its committed offset, with the note committed along; acks, attempts and
        invisible durations carry over."""
        self.lapse()
        start, note = self.book.committable(p), self.book.note(p)
        self.book.drop(p)
        now = self.clock.monotonic()
        for handle, held in list(self.held.items()):
            if held.key[0] != p:
                continue
            del self.held[handle]
            rec = self.recs[held.key]
            if rec.attempt >= MAX_ATTEMPTS:
                rec.state = "dead"
            else:
                rec.state = "waiting"
                rec.not_before = now + round((held.deadline - now) * 1000) / 1000
        if start is None:
            return
        self.book.restore(p, start, note)
        for key in sorted(k for k in self.recs if k[0] == p):
            if key[1] < start:
                assert self.recs[key].state == "done", f"{key} was committed but not done"
                continue
            self.book.add(p, key[1], self.recs[key].group, key)

    # -- invariants -------------------------------------------------------------------------

    @invariant()
    def commits_never_pass_a_record_not_done(self) -> None:
        for p in PARTITIONS:
            committable = self.book.committable(p)
            if committable is None:
                continue
            open_ = [k[1] for k, r in self.recs.items() if k[0] == p and r.state != "done"]
            assert committable == min(open_, default=self.next[p])

    def teardown(self) -> None:
        """Nothing is lost: acking everything handed out, and burying the dead, finishes
        every record, and the commits reach the end of each partition."""
        if not hasattr(self, "book"):
            return
        for _ in range(4 * MAX_ATTEMPTS + len(self.recs) + 2):
            self.clock.advance(60_000)
            for entry in self.book.expire():
                self.book.buried(entry)
                self.finish(entry.record)
            for entry in self.book.take(1000, 1):
                self.book.ack(entry.handle)
                self.finish(entry.record)
        assert all(rec.state == "done" for rec in self.recs.values())
        for p in self.book.partitions():
            assert self.book.committable(p) == self.next[p]


FifoBookMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_the_fifo_book_keeps_order_loses_nothing_and_commits_only_what_is_done = (
    FifoBookMachine.TestCase
)
