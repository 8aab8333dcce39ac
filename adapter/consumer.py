"""``PushConsumer``: clustering, broadcasting and orderly consumption on Kafka.

Reproduces ``rocketmq.client.PushConsumer`` of rocketmq-client-python 2.0 and the push
consumer rules of RocketMQ's ``ConsumeMessageConcurrentlyService`` /
``ConsumeMessageOrderlyService``:

- CLUSTERING: the group shares the queues (a Kafka consumer group); each message is seen by
  one member. BROADCASTING: every instance reads every queue and keeps its own offsets, under
  ``<group>@<instanceName>`` (see :func:`adapter.naming.broadcast_group_id`).
- Concurrent mode runs callbacks on ``set_thread_count`` threads (default 20). Offsets are
  committed only over the contiguous prefix of finished messages (:mod:`adapter.offsets`),
  so a slow message is never skipped by faster ones.
- Orderly mode processes each queue on one thread at a time, in queue order. A failed
  message suspends its queue for 1000 ms (``suspendCurrentQueueTimeMillis``) and is retried
  in place, without skipping, as RocketMQ's orderly consumer does.
- A callback that returns ``RECONSUME_LATER``, returns anything but ``CONSUME_SUCCESS`` or
  raises, fails the message. Clustering: the message is sent back (:mod:`adapter.send_back`):
  to ``%RETRY%<group>`` at level 3 + reconsume_times, or after ``max_reconsume_times`` (16) to
  ``%DLQ%<group>``; its offset is committed only once the copy is acknowledged. If the
  send-back fails, it is consumed again locally after 5000 ms with ``reconsume_times`` + 1
  (RocketMQ's fallback). Clustering consumers also consume their retry topic, and the callback
  of the original topic sees a retried message with that topic and its ``reconsume_times``.
  Broadcasting: a failed message is dropped with a warning, as RocketMQ does.
- A new group starts from the earliest retained message; a restarted one resumes from its
  committed offsets. ``shutdown()`` lets running callbacks finish and commits what finished.

Known gaps: an orderly consumer retries a failed message in place without limit (RocketMQ's
orderly default, ``Integer.MAX_VALUE`` reconsume times). Broadcasting picks up partitions
added after ``start()`` only on restart.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import IntEnum
from types import TracebackType
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka import Message as KafkaMessage
from confluent_kafka.admin import AdminClient
from tenacity import retry, retry_if_exception_type, stop_after_delay, wait_exponential

from adapter import naming
from adapter.client_settings import ClientSettings
from adapter.config import ConsumerConfig, KafkaSettings, MessageModel, delay_levels_from_env
from adapter.exceptions import AdapterError, PushConsumerStartFailed
from adapter.message import ReceivedMessage
from adapter.offsets import PartitionOffsets
from adapter.send_back import SendBack
from adapter.tags import TagFilter

log = logging.getLogger(__name__)

_POLL_BATCH = 500
_POLL_TIMEOUT_S = 0.1
_SHUTDOWN_WAIT_S = 30.0
_REVOKE_WAIT_S = 10.0


class ConsumeStatus(IntEnum):
    CONSUME_SUCCESS = 0
    RECONSUME_LATER = 1


MessageCallback = Callable[[ReceivedMessage], Any]


@dataclass(frozen=True, slots=True)
class Subscription:
    topic: str
    kafka_topic: str
    callback: MessageCallback
    filter: TagFilter


class _Lane:
    """One assigned partition: its in-flight offsets and, for orderly mode, its backlog.

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
        self.backlog: deque[list[KafkaMessage]] = deque()
        self.busy = False

    def settle(self) -> None:
        """Move finished offsets into the tracker (poll thread only)."""
        finished, ack = self.finished, self.offsets.ack
        while finished:
            ack(finished.popleft())


class ConsumerStats:
    """Counters for tests, benchmarks and logs."""

    __slots__ = ("consumed", "filtered", "failed", "dropped", "sent_back")

    def __init__(self) -> None:
        self.sent_back = 0
        self.consumed = 0
        self.filtered = 0
        self.failed = 0
        self.dropped = 0


class PushConsumer(ClientSettings):
    """Drop-in for ``rocketmq.client.PushConsumer``."""

    def __init__(
        self,
        group_id: str,
        orderly: bool = False,
        message_model: MessageModel = MessageModel.CLUSTERING,
    ) -> None:
        self._group = group_id
        self._orderly = orderly
        self._model = MessageModel(message_model)
        self._bootstrap: str | None = None
        self._instance_name = "DEFAULT"
        self._thread_count: int | None = None
        self._batch_max_size = 1
        self._max_reconsume_times: int | None = None
        self._subscriptions: dict[str, Subscription] = {}
        self._runner: _ConsumeLoop | None = None
        self.stats = ConsumerStats()

    # -- settings ---------------------------------------------------------------------------

    def set_message_model(self, model: MessageModel) -> None:
        self._model = MessageModel(model)

    def set_thread_count(self, thread_count: int) -> None:
        self._thread_count = thread_count

    def set_message_batch_max_size(self, max_size: int) -> None:
        """Accepted for compatibility; callbacks always receive one message, as in 2.0."""
        self._batch_max_size = max_size

    def set_max_reconsume_times(self, times: int) -> None:
        """Failed deliveries before a message goes to ``%DLQ%<group>`` (default 16)."""
        self._max_reconsume_times = times

    def subscribe(self, topic: str, callback: MessageCallback, expression: str = "*") -> None:
        """Consume ``topic`` with ``callback``, keeping messages whose tag matches ``expression``.

        Raises :class:`~adapter.exceptions.InvalidNameError` for a bad topic name and
        :class:`~adapter.exceptions.TagExpressionError` for a malformed expression.
        """
        kafka_topic = naming.kafka_topic(topic)
        self._subscriptions[kafka_topic] = Subscription(
            topic, kafka_topic, callback, TagFilter.parse(expression)
        )

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        if self._runner is not None:
            return
        if not self._subscriptions:
            raise PushConsumerStartFailed(
                f"consumer group {self._group!r} has no subscription; call subscribe() first"
            )
        try:
            naming.validate_group(self._group)
            kwargs: dict[str, Any] = {}
            if self._thread_count is not None:
                kwargs["thread_count"] = self._thread_count
            if self._max_reconsume_times is not None:
                kwargs["max_reconsume_times"] = self._max_reconsume_times
            config = ConsumerConfig(
                KafkaSettings.from_env(self._bootstrap),
                self._group,
                message_model=self._model,
                orderly=self._orderly,
                instance_name=self._instance_name,
                batch_max_size=self._batch_max_size,
                delay_levels=delay_levels_from_env(),
                **kwargs,
            )
            runner = _ConsumeLoop(config, dict(self._subscriptions), self.stats)
            runner.start()
        except (AdapterError, KafkaException) as exc:
            raise PushConsumerStartFailed(
                f"consumer group {self._group!r} could not start: {exc}"
            ) from exc
        self._runner = runner

    def assigned_queues(self) -> list[tuple[str, int]]:
        """(topic, queue id) pairs this instance consumes now (adapter extension)."""
        runner = self._runner
        return runner.assigned() if runner is not None else []

    def shutdown(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.stop()

    def __enter__(self) -> PushConsumer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()


class _ConsumeLoop:
    """The poll thread, the callback threads and the offsets between them.

    Stop order: stop intake (the poll thread leaves its loop), let running callbacks finish
    (messages not yet started stay uncommitted), commit the finished prefix, close the Kafka
    consumer, stop the callback threads.
    """

    def __init__(
        self,
        config: ConsumerConfig,
        subscriptions: dict[str, Subscription],
        stats: ConsumerStats,
    ) -> None:
        self._config = config
        self._subs = subscriptions
        self._stats = stats
        self._client = Consumer(config.librdkafka(), logger=log)
        self._pool = ThreadPoolExecutor(
            max_workers=config.thread_count, thread_name_prefix=f"consume-{config.group}"
        )
        self._lanes: dict[tuple[str, int], _Lane] = {}
        self._retries: list[tuple[float, int, _Lane, KafkaMessage, ReceivedMessage]] = []
        self._retry_seq = itertools.count()
        self._retry_lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"poll-{config.group}", daemon=True)
        self._broadcasting = config.message_model == MessageModel.BROADCASTING
        self._send_back = None if self._broadcasting else SendBack(config)
        self._last_commit = time.monotonic()

    def start(self) -> None:
        try:
            if self._send_back is not None:
                self._subscribe_retry_topic(self._send_back)
            if self._broadcasting:
                self._assign_everything()
            else:
                self._client.subscribe(
                    list(self._subs),
                    on_assign=self._on_assign,
                    on_revoke=self._on_revoke,
                    on_lost=self._on_lost,
                )
        except BaseException:
            self._client.close()
            self._pool.shutdown(wait=False)
            raise
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(_SHUTDOWN_WAIT_S + _REVOKE_WAIT_S + 10)

    def _subscribe_retry_topic(self, send_back: SendBack) -> None:
        """RocketMQ's clustering consumers consume ``%RETRY%<group>`` too, with ``*``."""
        admin = AdminClient(self._config.kafka.librdkafka({}))
        send_back.prepare(admin)
        retry_topic = naming.retry_topic(self._config.group)
        self._subs[send_back.retry_kafka_topic] = Subscription(
            retry_topic, send_back.retry_kafka_topic, self._route_retry, TagFilter.parse("*")
        )

    def _route_retry(self, message: ReceivedMessage) -> Any:
        """A retried message goes to the callback of its original topic."""
        subscription = self._subs.get(naming.kafka_topic(message.topic))
        if subscription is None or subscription.callback == self._route_retry:
            subscription = next(s for s in self._subs.values() if s.callback != self._route_retry)
        return subscription.callback(message)

    def assigned(self) -> list[tuple[str, int]]:
        return sorted((naming.decode(topic), part) for topic, part in list(self._lanes))

    # -- assignment -------------------------------------------------------------------------

    def _assign_everything(self) -> None:
        metadata = self._client.list_topics(timeout=10)
        partitions: list[TopicPartition] = []
        for kafka_topic in self._subs:
            info = metadata.topics.get(kafka_topic)
            if info is None or info.error is not None:
                raise AdapterError(
                    f"broadcasting needs topic {kafka_topic!r} to exist: "
                    f"{info.error.str() if info is not None and info.error else 'not found'}",
                    topic=kafka_topic,
                )
            partitions.extend(TopicPartition(kafka_topic, p) for p in sorted(info.partitions))
        for tp in partitions:
            self._add_lane(tp)
        self._client.assign(self._start_positions(partitions))

    @retry(
        retry=retry_if_exception_type(KafkaException),
        wait=wait_exponential(multiplier=0.2, max=2.0),
        stop=stop_after_delay(30),
        reraise=True,
    )
    def _start_positions(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """This instance's committed offsets, or the earliest retained message where none.

        Fetched here, with retries, because a young broker answers NOT_COORDINATOR for a while.
        """
        positions = self._client.committed(partitions, timeout=5)
        for tp in positions:
            if tp.error is not None:
                raise KafkaException(tp.error)
            if tp.offset < 0:
                tp.offset = OFFSET_BEGINNING
        return list(positions)

    def _add_lane(self, tp: TopicPartition) -> None:
        self._lanes[(tp.topic, tp.partition)] = _Lane(tp.topic, tp.partition, self._subs[tp.topic])

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._add_lane(tp)
        log.info("group %s assigned %s", self._config.group, _describe(partitions))

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._release(partitions, commit=True)
        log.info("group %s revoked %s", self._config.group, _describe(partitions))

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._release(partitions, commit=False)
        log.warning("group %s lost %s", self._config.group, _describe(partitions))

    def _release(self, partitions: list[TopicPartition], *, commit: bool) -> None:
        """Let running callbacks of these partitions finish, commit, and forget them."""
        lanes = [self._lanes.pop((tp.topic, tp.partition), None) for tp in partitions]
        deadline = time.monotonic() + _REVOKE_WAIT_S
        for lane in lanes:
            if lane is None:
                continue
            with lane.lock:
                lane.revoked = True
                while lane.running and time.monotonic() < deadline:
                    lane.idle.wait(max(0.0, deadline - time.monotonic()))
        if commit:
            self._commit([lane for lane in lanes if lane is not None], synchronous=True)

    # -- the poll loop ----------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                self._poll_once()
        except Exception:
            log.exception("consumer %s poll loop failed", self._config.group)
        finally:
            self._finish()

    def _poll_once(self) -> None:
        self._dispatch_due_retries()
        self._apply_backpressure()
        try:
            records = self._client.consume(_POLL_BATCH, _POLL_TIMEOUT_S)
        except KafkaException as exc:
            log.warning("consumer %s poll failed: %s", self._config.group, exc)
            self._stopping.wait(1.0)
            return
        if records:
            self._dispatch(records)
        now = time.monotonic()
        if now - self._last_commit >= self._config.commit_interval_ms / 1000.0:
            self._last_commit = now
            self._commit(list(self._lanes.values()), synchronous=False)

    def _dispatch(self, records: list[KafkaMessage]) -> None:
        batches: dict[tuple[str, int], list[KafkaMessage]] = {}
        for record in records:
            error = record.error()
            if error is not None:
                self._on_record_error(error)
                continue
            key = (str(record.topic()), int(record.partition() or 0))
            batch = batches.get(key)
            if batch is None:
                batches[key] = batch = []
            batch.append(record)
        for key, batch in batches.items():
            lane = self._lanes.get(key)
            if lane is None:  # not ours any more (revoked during this poll)
                continue
            track = lane.offsets.track
            for record in batch:
                track(record.offset())  # type: ignore[arg-type]
            if self._config.orderly:
                self._enqueue_orderly(lane, batch)
            else:
                # Idle threads take the queue's messages one at a time, so a slow message
                # holds up only the thread running it.
                work = deque(batch)
                for _ in range(min(self._config.thread_count, len(batch))):
                    self._pool.submit(self._drain, lane, work)

    def _on_record_error(self, error: KafkaError) -> None:
        if error.code() == KafkaError._PARTITION_EOF:
            return
        if error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            log.warning("consumer %s: %s (waiting for the topic)", self._config.group, error.str())
            return
        log.error("consumer %s: %s", self._config.group, error.str())

    def _apply_backpressure(self) -> None:
        limit = self._config.max_in_flight_per_queue
        to_pause, to_resume = [], []
        for lane in self._lanes.values():
            lane.settle()
            in_flight = lane.offsets.in_flight
            if not lane.paused and in_flight >= limit:
                lane.paused = True
                to_pause.append(TopicPartition(lane.topic, lane.partition))
            elif lane.paused and in_flight < limit // 2:
                lane.paused = False
                to_resume.append(TopicPartition(lane.topic, lane.partition))
        if to_pause:
            self._client.pause(to_pause)
        if to_resume:
            self._client.resume(to_resume)

    # -- running callbacks ------------------------------------------------------------------

    def _received(self, lane: _Lane, record: KafkaMessage) -> ReceivedMessage:
        ts_type, ts = record.timestamp()
        return ReceivedMessage(
            topic=lane.subscription.topic,
            kafka_topic=lane.topic,
            body=record.value(),
            queue_id=lane.partition,
            queue_offset=record.offset(),  # type: ignore[arg-type]
            timestamp=ts,
            append_time=ts_type == TIMESTAMP_LOG_APPEND_TIME,
            headers=record.headers(),  # type: ignore[arg-type]
        )

    def _consume(self, lane: _Lane, message: ReceivedMessage) -> bool:
        """Run the callback; True when the message is finished (consumed or filtered)."""
        sub = lane.subscription
        if sub.filter.tags is not None and not sub.filter.matches(message.tags or None):
            self._stats.filtered += 1
            return True
        try:
            status = sub.callback(message)
        except Exception:
            log.exception(
                "callback failed for %s (queue %d offset %d); it will be consumed again",
                message.id,
                lane.partition,
                message.queue_offset,
            )
            status = ConsumeStatus.RECONSUME_LATER
        if status == ConsumeStatus.CONSUME_SUCCESS:
            self._stats.consumed += 1
            return True
        if status != ConsumeStatus.RECONSUME_LATER:
            log.error(
                "callback for %s returned %r; use ConsumeStatus as response. "
                "Treated as RECONSUME_LATER",
                message.id,
                status,
            )
        self._stats.failed += 1
        return False

    def _begin(self, lane: _Lane) -> bool:
        with lane.lock:
            if lane.revoked or self._stopping.is_set():
                return False
            lane.running += 1
            return True

    def _end(self, lane: _Lane) -> None:
        with lane.lock:
            lane.running -= 1
            if lane.running == 0:
                lane.idle.notify_all()

    def _drain(self, lane: _Lane, work: deque[KafkaMessage]) -> None:
        """Consume messages of one queue from ``work`` until it is empty."""
        if not self._begin(lane):
            return
        stopping = self._stopping
        try:
            while not (lane.revoked or stopping.is_set()):
                try:
                    record = work.popleft()
                except IndexError:
                    return
                message = self._received(lane, record)
                if self._consume(lane, message):
                    lane.finished.append(message.queue_offset)
                else:
                    self._after_failure(lane, record, message)
        finally:
            self._end(lane)

    def _after_failure(self, lane: _Lane, record: KafkaMessage, message: ReceivedMessage) -> None:
        if self._broadcasting:
            self._stats.dropped += 1
            log.warning(
                "broadcasting consumer drops failed message %s (queue %d offset %d), "
                "as RocketMQ does",
                message.id,
                lane.partition,
                message.queue_offset,
            )
            lane.finished.append(message.queue_offset)
            return
        if self._send_back is not None and self._send_back.send(message):
            self._stats.sent_back += 1
            lane.finished.append(message.queue_offset)
            return
        due = time.monotonic() + self._config.local_retry_ms / 1000.0
        with self._retry_lock:
            heapq.heappush(self._retries, (due, next(self._retry_seq), lane, record, message))

    def _dispatch_due_retries(self) -> None:
        if not self._retries:
            return
        now = time.monotonic()
        due = []
        with self._retry_lock:
            while self._retries and self._retries[0][0] <= now:
                due.append(heapq.heappop(self._retries))
        for _, _, lane, record, message in due:
            if lane.revoked:
                continue
            message._count_local_retry()
            self._pool.submit(self._retry_one, lane, record, message)

    def _retry_one(self, lane: _Lane, record: KafkaMessage, message: ReceivedMessage) -> None:
        if not self._begin(lane):
            return
        try:
            if self._consume(lane, message):
                lane.finished.append(message.queue_offset)
            else:
                self._after_failure(lane, record, message)
        finally:
            self._end(lane)

    def _enqueue_orderly(self, lane: _Lane, batch: list[KafkaMessage]) -> None:
        with lane.lock:
            lane.backlog.append(batch)
            if lane.busy:
                return
            lane.busy = True
        self._pool.submit(self._run_orderly, lane)

    def _run_orderly(self, lane: _Lane) -> None:
        """Drain one queue's backlog in order; a failed message is retried in place."""
        while True:
            with lane.lock:
                if not lane.backlog or lane.revoked or self._stopping.is_set():
                    lane.busy = False
                    return
                batch = lane.backlog.popleft()
            for record in batch:
                if not self._begin(lane):
                    with lane.lock:
                        lane.busy = False
                    return
                consumed = False
                try:
                    message = self._received(lane, record)
                    while not self._consume(lane, message):
                        if self._stopping.wait(self._config.suspend_ms / 1000.0) or lane.revoked:
                            break
                        message._count_local_retry()
                    else:
                        consumed = True
                        lane.finished.append(message.queue_offset)
                finally:
                    self._end(lane)
                if not consumed:
                    with lane.lock:
                        lane.busy = False
                    return

    # -- offsets ----------------------------------------------------------------------------

    def _commit(self, lanes: list[_Lane], *, synchronous: bool) -> None:
        offsets = []
        for lane in lanes:
            lane.settle()
            position = lane.offsets.take_commit()
            if position is not None:
                offsets.append(TopicPartition(lane.topic, lane.partition, position))
        if not offsets:
            return
        try:
            if synchronous:
                self._client.commit(offsets=offsets, asynchronous=False)
            else:
                self._client.commit(offsets=offsets, asynchronous=True)
        except KafkaException as exc:
            log.warning("consumer %s commit failed: %s", self._config.group, exc)

    def _finish(self) -> None:
        lanes = list(self._lanes.values())
        deadline = time.monotonic() + _SHUTDOWN_WAIT_S
        for lane in lanes:
            with lane.lock:
                while lane.running and time.monotonic() < deadline:
                    lane.idle.wait(max(0.0, deadline - time.monotonic()))
        self._commit(lanes, synchronous=True)
        self._lanes.clear()
        try:
            self._client.close()
        except (KafkaException, RuntimeError) as exc:
            log.warning("consumer %s close failed: %s", self._config.group, exc)
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._send_back is not None:
            self._send_back.close()


def _describe(partitions: list[TopicPartition]) -> str:
    return ", ".join(f"{naming.decode(tp.topic)}[{tp.partition}]" for tp in partitions) or "-"
