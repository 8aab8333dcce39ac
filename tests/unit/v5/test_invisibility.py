"""The invisibility book on a manual clock (deadlines under Kafka's lock, never past it), and
the fetch window that says when that lock may have started."""

from __future__ import annotations

import pytest

from adapter.clock import ManualClock
from adapter.v5.exception import BadRequestException
from adapter.v5.invisibility import (
    HEADROOM_S,
    MARGIN_S,
    MIN_HOLD_S,
    FetchWindow,
    InvisibilityBook,
)

pytestmark = pytest.mark.timeout(30)

LOCK_S = 15.0


def book_with(*names: str, clock: ManualClock) -> InvisibilityBook[str]:
    book: InvisibilityBook[str] = InvisibilityBook(LOCK_S, clock)
    book.fetched("member-0", [(name, name) for name in names], clock.monotonic())
    return book


def test_a_fetched_record_is_handed_out_once_until_its_deadline() -> None:
    clock = ManualClock()
    book = book_with("a", clock=clock)

    [lease] = book.hand_out(10, 5)

    assert lease.record == "a"
    assert lease.deadline == clock.monotonic() + 5
    assert book.hand_out(10, 5) == []
    clock.advance(4_999)
    assert book.due() == []
    clock.advance(1)
    [gone] = book.due()
    assert gone.record == "a"
    book.settled(gone)  # Kafka took the release
    assert not book.holds("member-0")


def test_at_most_the_asked_count_is_handed_out_and_the_rest_waits() -> None:
    clock = ManualClock()
    book = book_with("a", "b", "c", clock=clock)

    first = book.hand_out(2, 5)
    second = book.hand_out(2, 5)

    assert [lease.record for lease in first] == ["a", "b"]
    assert [lease.record for lease in second] == ["c"]


def test_an_acked_record_never_comes_due_and_its_handle_is_then_invalid() -> None:
    clock = ManualClock()
    book = book_with("a", clock=clock)
    [lease] = book.hand_out(1, 5)

    assert book.settle(lease.handle).record == "a"
    clock.advance(60_000)

    assert book.due() == []
    with pytest.raises(BadRequestException, match="invalid or expired"):
        book.settle(lease.handle)


def test_a_waiting_record_is_not_ackable() -> None:
    clock = ManualClock()
    book = book_with("a", "b", clock=clock)
    [handed] = book.hand_out(1, 5)
    waiting = next(h for h in book._leases if h != handed.handle)

    with pytest.raises(BadRequestException, match="invalid or expired"):
        book.settle(waiting)


def test_the_longest_invisible_duration_is_the_lock_less_the_headroom() -> None:
    book: InvisibilityBook[str] = InvisibilityBook(LOCK_S, ManualClock())

    assert book.check_duration(LOCK_S - HEADROOM_S) == LOCK_S - HEADROOM_S
    with pytest.raises(BadRequestException, match="at most 12 s") as refused:
        book.check_duration(LOCK_S - HEADROOM_S + 0.5)
    assert refused.value.code == 40011
    with pytest.raises(BadRequestException, match="out of range"):
        book.check_duration(-1)
    with pytest.raises(BadRequestException, match="number of seconds"):
        book.check_duration("10")  # type: ignore[arg-type]


def test_a_record_is_handed_out_only_if_its_deadline_falls_inside_the_lock() -> None:
    clock = ManualClock()
    book = book_with("a", clock=clock)
    clock.advance(5_000)  # the record waited 5 s: its lock ends in 10 s, less the margin

    assert book.hand_out(1, 12) == []
    [lease] = book.hand_out(1, LOCK_S - 5 - MARGIN_S)
    assert lease.deadline is not None
    assert lease.deadline <= lease.lock_until


def test_a_change_moves_the_deadline_within_the_lock_and_is_refused_beyond_it() -> None:
    clock = ManualClock()
    book = book_with("a", clock=clock)
    [lease] = book.hand_out(1, 2)
    clock.advance(1_000)

    book.change(lease.handle, 8)
    assert lease.deadline == clock.monotonic() + 8
    clock.advance(3_000)
    with pytest.raises(BadRequestException, match="cannot be renewed") as refused:
        book.change(lease.handle, 11)  # 4 + 11 s > the 15 s lock less the margin
    assert refused.value.code == 40011
    assert lease.deadline == clock.monotonic() + 5  # unchanged by the refusal
    clock.advance(4_990)
    assert book.due() == []
    clock.advance(20)
    assert [gone.handle for gone in book.due()] == [lease.handle]


def test_a_change_to_zero_makes_the_record_due_at_once() -> None:
    clock = ManualClock()
    book = book_with("a", clock=clock)
    [lease] = book.hand_out(1, 10)

    book.change(lease.handle, 0)

    assert [gone.handle for gone in book.due()] == [lease.handle]


def test_a_waiting_record_is_released_before_its_lock_runs_out() -> None:
    clock = ManualClock()
    book = book_with("a", "b", clock=clock)
    book.hand_out(1, LOCK_S - MARGIN_S - 0.5)
    clock.advance(int((LOCK_S - MARGIN_S - MIN_HOLD_S) * 1000) - 1)
    assert [lease.record for lease in book.due()] == []

    clock.advance(2)

    assert [lease.record for lease in book.due()] == ["b"]
    assert book.waiting() == 0
    assert book.handed_out() == 1


def test_the_lock_counts_from_the_previous_poll_not_this_one() -> None:
    clock = ManualClock()
    book: InvisibilityBook[str] = InvisibilityBook(LOCK_S, clock)
    previous_poll = clock.monotonic()
    clock.advance(10_000)  # librdkafka may have fetched any time since then

    book.fetched("member-0", [("a", "a")], previous_poll)

    assert book.hand_out(1, 5) == []  # 10 + 5 s would outlast the lock
    [lease] = book.hand_out(1, 3)
    assert lease.lock_until == previous_poll + LOCK_S - MARGIN_S


def test_next_due_is_the_earliest_deadline_or_lock_end() -> None:
    clock = ManualClock()
    book = book_with("a", "b", clock=clock)
    start = clock.monotonic()
    assert book.next_due() == start + LOCK_S - MARGIN_S - MIN_HOLD_S

    book.hand_out(1, 3)

    assert book.next_due() == start + 3


def test_a_member_holds_records_until_all_are_settled_or_due() -> None:
    clock = ManualClock()
    book = book_with("a", clock=clock)
    book.fetched("member-1", [("b", "b")], clock.monotonic())

    [a, b] = book.hand_out(2, 5)
    book.settled(book.settle(a.handle))

    assert not book.holds("member-0")
    assert book.holds("member-1")
    assert [lease.record for lease in book.drop_member("member-1")] == ["b"]
    assert book.handed_out() == 0


def test_a_lock_too_short_for_any_duration_is_refused() -> None:
    with pytest.raises(ValueError, match="no invisible duration"):
        InvisibilityBook(HEADROOM_S, ManualClock())


def test_the_first_poll_counts_the_lock_from_the_subscription() -> None:
    window = FetchWindow(subscribed_at=100.0, fetch_wait_s=0.5)

    assert window.poll_started(105.0) == 100.0


def test_after_a_poll_that_returned_records_the_next_counts_from_its_own_start() -> None:
    window = FetchWindow(subscribed_at=100.0, fetch_wait_s=0.5)
    window.poll_ended(started=101.0, got_records=True)

    assert window.poll_started(130.0) == 130.0  # nothing is fetched while records are held


def test_an_acknowledgement_may_fetch_so_the_next_poll_counts_from_it() -> None:
    window = FetchWindow(subscribed_at=100.0, fetch_wait_s=0.5)
    window.poll_ended(started=101.0, got_records=True)
    window.acknowledged(110.0)
    window.acknowledged(120.0)  # the first acknowledgement is the one that counts

    assert window.poll_started(130.0) == 110.0


def test_after_an_empty_poll_a_fetch_may_still_be_out() -> None:
    window = FetchWindow(subscribed_at=100.0, fetch_wait_s=0.5)
    window.poll_ended(started=101.0, got_records=False)

    assert window.poll_started(160.0) == 100.5  # records could be that old by now
    window.poll_ended(started=160.0, got_records=False)
    assert window.poll_started(161.0) == 159.5


def test_a_new_subscription_may_fetch_at_once() -> None:
    window = FetchWindow(subscribed_at=100.0, fetch_wait_s=0.5)
    window.poll_ended(started=101.0, got_records=True)
    window.subscribed(125.0)

    assert window.poll_started(130.0) == 125.0


def test_a_record_released_unseen_is_remembered_until_it_is_settled() -> None:
    clock = ManualClock()
    book = book_with("t:0:1", "t:0:2", clock=clock)
    [handed] = book.hand_out(1, 5)
    book.settle(handed.handle)
    clock.advance(int((LOCK_S - MARGIN_S - MIN_HOLD_S) * 1000) + 1)

    [unseen] = book.due()

    assert not unseen.handed_out
    assert (book.unseen("t:0:1"), book.unseen("t:0:2")) == (0, 1)
    book.fetched("member-0", [("t:0:2", "t:0:2")], clock.monotonic())
    [again] = book.hand_out(1, 5)
    assert book.unseen("t:0:2") == 1, "handing it out changes nothing; settling it does"
    book.settle(again.handle)
    assert book.unseen("t:0:2") == 0


def test_a_member_acking_its_last_record_may_not_poll_until_kafka_answered() -> None:
    """librdkafka refuses a poll while a record of the previous one is unacknowledged: a
    record being acked or released still holds its member until the pool says it is done."""
    clock = ManualClock()
    book = book_with("a", "b", clock=clock)
    [a, b] = book.hand_out(2, 5)

    acking = book.settle(a.handle)
    clock.advance(5_000)
    [releasing] = book.due()

    assert releasing.handle == b.handle
    assert book.holds("member-0"), "both are on their way to Kafka"
    with pytest.raises(BadRequestException, match="invalid or expired"):
        book.settle(a.handle)  # acked already
    book.settled(acking)
    assert book.holds("member-0")
    book.settled(releasing)
    assert not book.holds("member-0")
    assert book.due() == []
    assert book.next_due() is None


def test_a_record_kafka_hands_out_again_while_it_is_held_keeps_its_handle_and_deadline() -> None:
    """A partition whose leader moves loses its acquisition locks, so Kafka hands a record the
    application still holds to the pool again (seen on three brokers: 1 s before its
    invisible duration ended). It stays invisible until its deadline, under the new fetch's
    lock, and the old fetch is released by the member that made it."""
    clock = ManualClock()
    book = book_with("t:0:5", clock=clock)
    [lease] = book.hand_out(1, 10)
    clock.advance(2_000)

    [old] = book.fetched("member-1", [("t:0:5", "again")], clock.monotonic())

    assert (old.member, old.record, old.settling) == ("member-0", "t:0:5", True)
    assert book.hand_out(1, 1) == [], "not handed out a second time"
    assert book.holds("member-0"), "until its old fetch is released"
    book.settled(old)
    assert not book.holds("member-0")
    held = book.get(lease.handle)
    assert (held.record, held.member, held.deadline) == ("again", "member-1", lease.deadline)
    assert book.unseen("t:0:5") == 1, "the second fetch is not an attempt"
    clock.advance(7_000)
    assert book.due() == []
    clock.advance(1_000)
    assert [gone.handle for gone in book.due()] == [lease.handle]


def test_a_record_fetched_again_while_its_ack_is_in_flight_waits_out_its_deadline() -> None:
    """Seen on three brokers (m-54): an ack hung on a stopped leader, the new leader handed
    the record out again 1.5 s after it was received with 6 s, and the ack failed only then.
    RocketMQ shows a message whose ack failed again when its invisible duration ends."""
    clock = ManualClock()
    book = book_with("t:0:5", clock=clock)
    [lease] = book.hand_out(1, 6)
    acking = book.settle(lease.handle)
    clock.advance(1_500)

    assert book.fetched("member-1", [("t:0:5", "again")], clock.monotonic()) == []
    book.settled(acking, refused=True)  # the ack failed: the lock had moved

    assert book.hand_out(1, 5) == [], "not before the acked delivery's deadline"
    clock.advance(4_499)
    assert book.hand_out(1, 5) == []
    clock.advance(1)
    [again] = book.hand_out(1, 5)
    assert (again.record, again.member) == ("again", "member-1")


def test_a_record_whose_ack_was_refused_waits_out_its_deadline_when_fetched_later() -> None:
    clock = ManualClock()
    book = book_with("t:0:5", clock=clock)
    [lease] = book.hand_out(1, 6)
    book.settled(book.settle(lease.handle), refused=True)
    clock.advance(2_000)

    book.fetched("member-1", [("t:0:5", "again")], clock.monotonic())

    assert book.hand_out(1, 5) == []
    clock.advance(4_000)
    assert [again.record for again in book.hand_out(1, 5)] == ["again"]


def test_a_record_acked_for_good_or_past_its_deadline_is_forgotten() -> None:
    clock = ManualClock()
    book = book_with("t:0:5", "t:0:6", clock=clock)
    [five, six] = book.hand_out(2, 6)
    book.settled(book.settle(five.handle))  # Kafka took the ack
    book.settled(book.settle(six.handle), refused=True)
    clock.advance(6_000)
    book.due()

    book.fetched("member-1", [("t:0:5", "5"), ("t:0:6", "6")], clock.monotonic())

    assert sorted(lease.record for lease in book.hand_out(2, 5)) == ["5", "6"]
