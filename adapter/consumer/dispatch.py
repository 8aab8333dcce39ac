"""Running consumer callbacks: concurrently or orderly, and what a failure leads to.

Reproduces RocketMQ's ``ConsumeMessageConcurrentlyService`` and ``ConsumeMessageOrderlyService``:

- concurrently, idle threads take a queue's messages one at a time, so a slow message holds up
  only the thread running it (:meth:`Dispatcher.submit`);
- orderly, each queue runs on one thread at a time, in queue order; a failed message suspends
  its queue for ``suspend_ms`` (1000) and is retried in place, without skipping;
- a callback that returns ``RECONSUME_LATER``, anything but ``CONSUME_SUCCESS``, or raises,
  fails the message (:func:`run_callback`); the failure handler then sends it back, drops it
  (broadcasting) or, when the send-back fails, has it consumed again locally after
  ``local_retry_ms`` (5000) with ``reconsume_times`` + 1, as RocketMQ's client falls back.

Pure of Kafka: items become :class:`~adapter.message.ReceivedMessage` through ``build``, on the
callback threads; finished offsets go
to each queue's :class:`Lane`, whose offset tracker the poll loop commits.

A callback that raises a ``BaseException`` that is not an ``Exception`` (``SystemExit``,
``KeyboardInterrupt``) stops the consumer, logged as an error (:meth:`Dispatcher._abort`).

Known gaps: an orderly consumer retries a failed message in place without limit (RocketMQ's
orderly default, ``Integer.MAX_VALUE`` reconsume times).
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from adapter import naming
from adapter.clock import SYSTEM_CLOCK, Clock
from adapter.consumer.offsets import PartitionOffsets
from adapter.message import ReceivedMessage
from adapter.message_filter import MessageFilter
from adapter.sql92 import Sql92Filter

log = logging.getLogger(__name__)


class ConsumeStatus(IntEnum):
    """``rocketmq.client.ConsumeStatus``."""

    CONSUME_SUCCESS = 0
    RECONSUME_LATER = 1


MessageCallback = Callable[[ReceivedMessage], Any]


@dataclass(frozen=True, slots=True)
class Subscription:
    topic: str
    kafka_topic: str
    callback: MessageCallback
    filter: MessageFilter


def _filtered_out(message_filter: MessageFilter, message: ReceivedMessage) -> bool:
    if isinstance(message_filter, Sql92Filter):
        return not message_filter.matches_raw(message.properties)
    return message_filter.tags is not None and not message_filter.matches(message.tags or None)


class ConsumerStats:
    """Counters for tests, benchmarks and logs."""

    __slots__ = ("consumed", "filtered", "failed", "dropped", "sent_back")

    def __init__(self) -> None:
        self.sent_back = 0
        self.consumed = 0
        self.filtered = 0
        self.failed = 0
        self.dropped = 0


def run_callback(sub: Subscription, message: ReceivedMessage, stats: ConsumerStats) -> bool:
    """Filter ``message`` by tag or SQL92, else run the callback; True when the message is
    finished (consumed or filtered out), False when it failed."""
    if _filtered_out(sub.filter, message):
        stats.filtered += 1
        return True
    try:
        status = sub.callback(message)
    except Exception:
        log.exception(
            "callback failed for %s (queue %d offset %d); it will be consumed again",
            message.id,
            message.queue_id,
            message.queue_offset,
        )
        status = ConsumeStatus.RECONSUME_LATER
    if status == ConsumeStatus.CONSUME_SUCCESS:
        stats.consumed += 1
        return True
    if status != ConsumeStatus.RECONSUME_LATER:
        log.error(
            "callback for %s returned %r; use ConsumeStatus as response. "
            "Treated as RECONSUME_LATER",
            message.id,
            status,
        )
    stats.failed += 1
    return False


class Lane:
    """One assigned queue (partition): its in-flight offsets and, orderly, its backlog.

    Callback threads only append finished offsets to ``finished`` (a thread-safe deque);
    the poll thread alone moves them into ``offsets``, so the tracker needs no lock.
    """

    __slots__ = (
        "topic",
        "partition",
        "subscription",
        "offsets",
        "finished",
        "lock",
        "idle",
        "running",
        "revoked",
        "paused",
        "backlog",
        "busy",
    )

    def __init__(self, topic: str, partition: int, subscription: Subscription) -> None:
        self.topic = topic
        self.partition = partition
        self.subscription = subscription
        self.offsets = PartitionOffsets()
        self.finished: deque[int] = deque()
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)
        self.running = 0
        self.revoked = False
        self.paused = False
        self.backlog: deque[list[Any]] = deque()
        self.busy = False

    def track(self, offset: int, group: str) -> None:
        """Track a fetched offset (poll thread only); one that goes back is logged."""
        last = self.offsets.fetched_up_to
        if self.offsets.track(offset):
            log.warning(
                "consumer %s: queue %s[%d] went back from offset %d to %d (its log was "
                "truncated, or its position reset); consuming again from there",
                group, naming.decode(self.topic), self.partition, last, offset,
            )  # fmt: skip

    def settle(self) -> None:
        """Move finished offsets into the tracker (poll thread only)."""
        finished, ack = self.finished, self.offsets.ack
        while finished:
            ack(finished.popleft())

    def wait_idle(self, deadline: float, clock: Clock = SYSTEM_CLOCK) -> None:
        """Until no callback of this queue runs, or the monotonic ``deadline``."""
        with self.lock:
            while self.running and clock.monotonic() < deadline:
                self.idle.wait(max(0.0, deadline - clock.monotonic()))


FailureHandler = Callable[[Lane, ReceivedMessage], bool]
"""After a failed message: True when it is finished (sent back, or dropped)."""


@dataclass(eq=False, kw_only=True)
class Dispatcher:
    """Hands messages to callback threads and records which offsets finished."""

    pool: Executor
    orderly: bool
    thread_count: int
    suspend_s: float
    """How long an orderly queue waits after a failure (``suspendCurrentQueueTimeMillis``)."""
    local_retry_s: float
    """How long a message whose send-back failed waits to be consumed again."""
    stats: ConsumerStats
    after_failure: FailureHandler
    stopping: threading.Event
    build: Callable[[Lane, Any], ReceivedMessage] = field(default=lambda _lane, item: item)
    """Turns a submitted item into the message a callback sees, on the callback's thread
    (the poll loop submits Kafka records: building messages there would serialise it)."""
    clock: Clock = SYSTEM_CLOCK
    fatal: BaseException | None = field(default=None, init=False)
    """What a callback raised that is not an ``Exception`` (the consumer then stops)."""
    _retries: list[tuple[float, int, Lane, ReceivedMessage]] = field(default_factory=list)
    _retry_seq: Iterator[int] = field(default_factory=itertools.count)
    _retry_lock: threading.Lock = field(default_factory=threading.Lock)

    def submit(self, lane: Lane, messages: list[Any]) -> None:
        """Consume ``messages`` of one queue (tracked in ``lane.offsets`` by the caller)."""
        if self.orderly:
            with lane.lock:
                lane.backlog.append(messages)
                if lane.busy:
                    return
                lane.busy = True
            self.pool.submit(self._run_orderly, lane)
            return
        work = deque(messages)
        for _ in range(min(self.thread_count, len(messages))):
            self.pool.submit(self._drain, lane, work)

    def dispatch_due_retries(self) -> None:
        """Submit the local retries whose time has come."""
        if not self._retries:
            return
        now = self.clock.monotonic()
        due = []
        with self._retry_lock:
            while self._retries and self._retries[0][0] <= now:
                due.append(heapq.heappop(self._retries))
        for _, _, lane, message in due:
            if lane.revoked:
                continue
            message._count_local_retry()
            self.pool.submit(self._retry_one, lane, message)

    # -- callback threads -------------------------------------------------------------------

    def _begin(self, lane: Lane) -> bool:
        with lane.lock:
            if lane.revoked or self.stopping.is_set():
                return False
            lane.running += 1
            return True

    def _end(self, lane: Lane) -> None:
        with lane.lock:
            lane.running -= 1
            if lane.running == 0:
                lane.idle.notify_all()

    def _abort(self, message: ReceivedMessage, exc: BaseException) -> None:
        """A callback raised a ``BaseException`` (``SystemExit``, ``KeyboardInterrupt``, ...):
        not a failed message but a request to stop, so the consumer stops; the message is
        not finished, and is consumed again after a restart."""
        self.fatal = exc
        log.error(
            "callback for %s (queue %d offset %d) raised %s, which is not an Exception: the "
            "consumer stops; this message and those after it are consumed again after a "
            "restart", message.id, message.queue_id, message.queue_offset,
            type(exc).__name__, exc_info=exc,
        )  # fmt: skip
        self.stopping.set()

    def _finish(self, lane: Lane, message: ReceivedMessage) -> None:
        try:
            done = run_callback(lane.subscription, message, self.stats)
        except BaseException as exc:  # noqa: BLE001 - stops the consumer, see _abort
            self._abort(message, exc)
            return
        if done or self.after_failure(lane, message):
            lane.finished.append(message.queue_offset)
        else:
            due = self.clock.monotonic() + self.local_retry_s
            with self._retry_lock:
                heapq.heappush(self._retries, (due, next(self._retry_seq), lane, message))

    def _drain(self, lane: Lane, work: deque[Any]) -> None:
        """Consume messages of one queue from ``work`` until it is empty."""
        if not self._begin(lane):
            return
        stopping = self.stopping
        try:
            while not (lane.revoked or stopping.is_set()):
                try:
                    item = work.popleft()
                except IndexError:
                    return
                self._finish(lane, self.build(lane, item))
        finally:
            self._end(lane)

    def _retry_one(self, lane: Lane, message: ReceivedMessage) -> None:
        if not self._begin(lane):
            return
        try:
            self._finish(lane, message)
        finally:
            self._end(lane)

    def _run_orderly(self, lane: Lane) -> None:
        """Drain one queue's backlog in order; a failed message is retried in place."""
        while True:
            with lane.lock:
                if not lane.backlog or lane.revoked or self.stopping.is_set():
                    lane.busy = False
                    return
                batch = lane.backlog.popleft()
            for item in batch:
                if not self._begin(lane):
                    with lane.lock:
                        lane.busy = False
                    return
                consumed = False
                message = self.build(lane, item)
                try:
                    while not run_callback(lane.subscription, message, self.stats):
                        if self.stopping.wait(self.suspend_s) or lane.revoked:
                            break
                        message._count_local_retry()
                    else:
                        consumed = True
                        lane.finished.append(message.queue_offset)
                except BaseException as exc:  # noqa: BLE001 - stops the consumer, see _abort
                    self._abort(message, exc)
                finally:
                    self._end(lane)
                if not consumed:
                    with lane.lock:
                        lane.busy = False
                    return
