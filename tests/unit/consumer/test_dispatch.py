"""Running callbacks: what counts as consumed, concurrent order of offsets, orderly retry in place,
and the local retry when a send-back fails. No Kafka: messages are built as a consumer sees them."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from adapter.clock import ManualClock
from adapter.consumer.dispatch import (
    ConsumerStats,
    ConsumeStatus,
    Dispatcher,
    Lane,
    Subscription,
    run_callback,
)
from adapter.message import ReceivedMessage
from adapter.tags import TagFilter
from tests.support import wait_until

pytestmark = pytest.mark.timeout(60)


def received(offset: int, tag: str = "TagA", body: str = "") -> ReceivedMessage:
    return ReceivedMessage(
        topic="T",
        kafka_topic="T",
        body=(body or f"m{offset}").encode(),
        queue_id=0,
        queue_offset=offset,
        timestamp=0,
        append_time=False,
        headers=[("UNIQ_KEY", f"ID{offset}".encode()), ("TAGS", tag.encode())],
    )


def subscription(callback: Callable[[ReceivedMessage], Any], expression: str = "*") -> Subscription:
    return Subscription("T", "T", callback, TagFilter.parse(expression))


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    executor = ThreadPoolExecutor(max_workers=4)
    yield executor
    executor.shutdown(wait=True, cancel_futures=True)


def dispatcher(
    pool: ThreadPoolExecutor,
    *,
    orderly: bool = False,
    after_failure: Callable[[Lane, ReceivedMessage], bool] = lambda lane, m: True,
    clock: ManualClock | None = None,
    stats: ConsumerStats | None = None,
) -> Dispatcher:
    return Dispatcher(
        pool=pool,
        orderly=orderly,
        thread_count=4,
        suspend_s=0.01,
        local_retry_s=5.0,
        stats=stats or ConsumerStats(),
        after_failure=after_failure,
        stopping=threading.Event(),
        clock=clock or ManualClock(),
    )


def committed_position(lane: Lane) -> int | None:
    lane.settle()
    return lane.offsets.position


@pytest.mark.parametrize(
    ("result", "finished"),
    [
        (ConsumeStatus.CONSUME_SUCCESS, True),
        (ConsumeStatus.RECONSUME_LATER, False),
        (None, False),
        ("ok", False),
    ],
)
def test_only_consume_success_finishes_a_message(result: object, finished: bool) -> None:
    stats = ConsumerStats()
    assert run_callback(subscription(lambda m: result), received(0), stats) is finished
    assert (stats.consumed, stats.failed) == ((1, 0) if finished else (0, 1))


def test_a_callback_that_raises_fails_the_message_and_is_counted() -> None:
    def boom(_m: ReceivedMessage) -> None:
        raise RuntimeError("boom")

    stats = ConsumerStats()
    assert run_callback(subscription(boom), received(0), stats) is False
    assert stats.failed == 1


def test_a_message_filtered_out_by_its_tag_is_finished_without_a_callback() -> None:
    calls: list[ReceivedMessage] = []
    stats = ConsumerStats()
    sub = subscription(calls.append, "TagB || TagC")
    assert run_callback(sub, received(0, tag="TagA"), stats) is True
    assert calls == []
    assert stats.filtered == 1


def test_concurrently_a_slow_message_holds_the_commit_but_not_the_others(
    pool: ThreadPoolExecutor,
) -> None:
    release = threading.Event()
    done: list[int] = []

    def callback(m: ReceivedMessage) -> ConsumeStatus:
        if m.queue_offset == 1:
            release.wait(10)
        done.append(m.queue_offset)
        return ConsumeStatus.CONSUME_SUCCESS

    lane = Lane("T", 0, subscription(callback))
    messages = [received(o) for o in range(6)]
    for m in messages:
        lane.offsets.track(m.queue_offset)
    dispatcher(pool).submit(lane, messages)
    wait_until(lambda: len(done) == 5, timeout=10, what="the five fast messages")
    assert committed_position(lane) == 1, "the slow message is not skipped"
    release.set()
    wait_until(lambda: committed_position(lane) == 6, timeout=10, what="everything finished")


def test_orderly_a_failing_message_is_retried_in_place_and_nothing_behind_it_runs_first(
    pool: ThreadPoolExecutor,
) -> None:
    seen: list[tuple[int, int]] = []
    failures = {2: 2}

    def callback(m: ReceivedMessage) -> ConsumeStatus:
        seen.append((m.queue_offset, m.reconsume_times))
        if failures.get(m.queue_offset, 0) > 0:
            failures[m.queue_offset] -= 1
            return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS

    lane = Lane("T", 0, subscription(callback))
    messages = [received(o) for o in range(5)]
    for m in messages:
        lane.offsets.track(m.queue_offset)
    orderly = dispatcher(pool, orderly=True)
    orderly.submit(lane, messages[:3])
    orderly.submit(lane, messages[3:])
    wait_until(lambda: committed_position(lane) == 5, timeout=10, what="all five consumed")
    assert seen == [(0, 0), (1, 0), (2, 0), (2, 1), (2, 2), (3, 0), (4, 0)]


def test_a_message_whose_send_back_failed_is_consumed_again_locally_later(
    pool: ThreadPoolExecutor,
) -> None:
    clock = ManualClock()
    attempts: list[int] = []

    def callback(m: ReceivedMessage) -> ConsumeStatus:
        attempts.append(m.reconsume_times)
        return ConsumeStatus.CONSUME_SUCCESS if len(attempts) > 1 else ConsumeStatus.RECONSUME_LATER

    lane = Lane("T", 0, subscription(callback))
    lane.offsets.track(0)
    concurrent = dispatcher(pool, after_failure=lambda lane, m: False, clock=clock)
    concurrent.submit(lane, [received(0)])
    wait_until(lambda: attempts == [0], timeout=10, what="the first attempt")
    concurrent.dispatch_due_retries()
    assert attempts == [0], "not before the local retry delay"
    assert committed_position(lane) == 0
    clock.advance(5_000)
    concurrent.dispatch_due_retries()
    wait_until(lambda: committed_position(lane) == 1, timeout=10, what="the local retry")
    assert attempts == [0, 1], "the retry counts as a reconsumption"


def test_a_revoked_queue_takes_no_new_work(pool: ThreadPoolExecutor) -> None:
    calls: list[int] = []
    lane = Lane("T", 0, subscription(lambda m: calls.append(m.queue_offset)))
    lane.revoked = True
    lane.offsets.track(0)
    dispatcher(pool).submit(lane, [received(0)])
    pool.shutdown(wait=True)
    assert calls == []


class Abort(BaseException):
    """Not an ``Exception``: what ``SystemExit`` or ``KeyboardInterrupt`` look like to a pool."""


@pytest.mark.parametrize("orderly", [False, True])
def test_a_base_exception_from_a_callback_stops_the_consumer_with_a_clear_error(
    pool: ThreadPoolExecutor, orderly: bool, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[int] = []

    def callback(m: ReceivedMessage) -> ConsumeStatus:
        ran.append(m.queue_offset)
        if m.queue_offset == 0:
            raise Abort("stop everything")
        return ConsumeStatus.CONSUME_SUCCESS

    lane = Lane("T", 0, subscription(callback))
    for o in range(3):
        lane.offsets.track(o)
    stopping = dispatcher(pool, orderly=orderly)
    stopping.thread_count = 1
    stopping.submit(lane, [received(o) for o in range(3)])

    wait_until(stopping.stopping.is_set, timeout=10, what="the consumer stopping")
    assert isinstance(stopping.fatal, Abort)
    assert "raised Abort, which is not an Exception: the consumer stops" in caplog.text
    assert committed_position(lane) == 0, "the message that raised is not finished"
    pool.shutdown(wait=True)
    assert ran == [0], "nothing runs after it"


def test_a_lane_logs_an_offset_going_backwards_and_tracks_from_there(
    caplog: pytest.LogCaptureFixture,
) -> None:
    lane = Lane("T", 3, subscription(lambda m: None))
    lane.track(10, "GID_x")
    lane.track(11, "GID_x")

    lane.track(4, "GID_x")

    assert "went back from offset 12 to 4" in caplog.text
    assert lane.offsets.position == 4
