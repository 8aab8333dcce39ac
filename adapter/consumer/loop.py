"""The push consumer's poll loop: assignment, back-pressure, and committing finished offsets.

Reproduces the pull side of RocketMQ's ``DefaultMQPushConsumerImpl`` on a Kafka consumer:

- CLUSTERING: the group shares the queues (a Kafka consumer group, cooperative rebalancing);
  BROADCASTING: every instance assigns itself every queue and keeps its own offsets, under
  ``<group>@<instanceName>`` (see :func:`adapter.naming.broadcast_group_id`);
- clustering consumers also consume their group's ``%RETRY%<group>``, and a retried message
  reaches the callback of its original topic;
- a fetch hands records to the callbacks as soon as one is there
  (:func:`adapter.kafka.reading.fetch`; librdkafka's ``consume(n, t)`` would hold every delivery
  until n records or t passed);
- offsets are committed every second, only over the contiguous prefix of finished messages
  (:mod:`adapter.consumer.offsets`), so a slow message is never skipped by faster ones;
- a queue with more than ``max_in_flight_per_queue`` (1000) unfinished messages is paused
  until half of them finish (RocketMQ's ``pullThresholdForQueue``);
- a new group starts from the earliest retained message; a restarted one resumes from its
  committed offsets. On revocation, running callbacks of the queue finish (up to 10 s; an
  orderly queue's, up to 15 min) and its offsets are committed before the queue goes.

Known gaps: broadcasting picks up partitions added after ``start()`` only on restart. An
orderly callback that runs longer than 15 min when its queue is revoked, or a member that
loses its queues (its session ended), lets the new owner run later messages of the queue
while the old callback still runs; the old one's offsets are then not committed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import tenacity
from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_LOG_APPEND_TIME,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka import Message as KafkaRecord

from adapter import naming, property_bytes
from adapter.clock import SYSTEM_CLOCK, Clock
from adapter.consumer.config import ConsumerConfig, MessageModel
from adapter.consumer.dispatch import ConsumerStats, Dispatcher, Lane, Subscription
from adapter.consumer.send_back import SendBack
from adapter.exceptions import AdapterError, InvalidNameError
from adapter.kafka import clients, reading
from adapter.logs import RepeatLimiter, shape
from adapter.message import ReceivedMessage
from adapter.tags import TagFilter

log = logging.getLogger(__name__)

_POLL_BATCH = 500
_POLL_TIMEOUT_S = 0.1
_SHUTDOWN_WAIT_S = 30.0
_REVOKE_WAIT_S = 10.0
_ORDERLY_REVOKE_WAIT_S = 15 * 60.0
"""How long a revoked orderly queue waits for its running callback: RocketMQ's queue lock
keeps the queue with it while it runs; Kafka gives the queue away once this member is out
of the group (``max.poll.interval.ms``, 16 min here)."""


class ConsumeLoop:
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
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._config = config
        self._subs = subscriptions
        self._clock = clock
        settings = {**config.librdkafka(), "on_commit": self._on_commit}
        self._client = clients.consumer(settings, announce=True)
        self._pool = ThreadPoolExecutor(
            max_workers=config.thread_count, thread_name_prefix=f"consume-{config.group}"
        )
        self._lanes: dict[tuple[str, int], Lane] = {}
        self._stopped: set[tuple[str, int]] = set()
        """The queues paused in Kafka for back-pressure."""
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"poll-{config.group}", daemon=True)
        self._broadcasting = config.message_model == MessageModel.BROADCASTING
        self._send_back = None if self._broadcasting else SendBack(config)
        self._dispatcher = Dispatcher(
            pool=self._pool,
            orderly=config.orderly,
            thread_count=config.thread_count,
            suspend_s=config.suspend_ms / 1000,
            local_retry_s=config.local_retry_ms / 1000,
            stats=stats,
            after_failure=self._after_failure,
            stopping=self._stopping,
            build=_received,
            clock=clock,
        )
        self._stats = stats
        self._last_commit = clock.monotonic()
        self._errors = RepeatLimiter(30.0, clock.monotonic)

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
        send_back.prepare()
        retry_topic = naming.retry_topic(self._config.group)
        self._subs[send_back.retry_kafka_topic] = Subscription(
            retry_topic, send_back.retry_kafka_topic, self._route_retry, TagFilter.parse("*")
        )

    def _route_retry(self, message: ReceivedMessage) -> Any:
        """A retried message goes to the callback of its original topic; one whose original
        topic is not subscribed here, or is not a topic name at all (a foreign writer's
        ``RETRY_TOPIC``), to the first subscription's, as RocketMQ hands it to the one
        listener."""
        try:
            subscription = self._subs.get(naming.kafka_topic(message.topic))
        except InvalidNameError:
            subscription = None
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
                    f"broadcasting needs topic {naming.decode(kafka_topic)!r} to exist: "
                    f"{info.error.str() if info is not None and info.error else 'not found'}",
                    topic=kafka_topic,
                )
            partitions.extend(TopicPartition(kafka_topic, p) for p in sorted(info.partitions))
        for tp in partitions:
            self._add_lane(tp)
        self._client.assign(self._start_positions(partitions))

    @tenacity.retry(
        retry=tenacity.retry_if_exception_type(KafkaException),
        wait=tenacity.wait_exponential(multiplier=0.2, max=2.0),
        stop=tenacity.stop_after_delay(30),
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
        self._lanes[(tp.topic, tp.partition)] = Lane(tp.topic, tp.partition, self._subs[tp.topic])

    def _on_assign(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._add_lane(tp)
            self._stopped.discard((tp.topic, tp.partition))
        log.info("group %s assigned %s", self._config.group, _describe(partitions))

    def _on_revoke(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        self._release(partitions, commit=True)
        log.info("group %s revoked %s", self._config.group, _describe(partitions))

    def _on_lost(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        self._release(partitions, commit=False)
        log.warning("group %s lost %s", self._config.group, _describe(partitions))

    def _release(self, partitions: list[TopicPartition], *, commit: bool) -> None:
        """Let running callbacks of these partitions finish, commit, and forget them.

        Revoked orderly queues wait for their callback as long as Kafka lets this member
        stay in the group: the new owner gets the queue only once this returns, so it never
        processes a later message of the queue while this one still runs (RocketMQ's queue
        lock). Lost queues are someone else's already: they wait briefly, and commit nothing."""
        lanes = [self._lanes.pop((tp.topic, tp.partition), None) for tp in partitions]
        self._stopped.difference_update((tp.topic, tp.partition) for tp in partitions)
        orderly = self._config.orderly and commit
        deadline = self._clock.monotonic() + (_ORDERLY_REVOKE_WAIT_S if orderly else _REVOKE_WAIT_S)
        for lane in lanes:
            if lane is None:
                continue
            with lane.lock:
                lane.revoked = True
                running = lane.running
            if running and orderly:
                log.info(
                    "group %s: queue %s[%d] revoked while its callback runs; handing it over "
                    "once it ends", self._config.group, naming.decode(lane.topic), lane.partition,
                )  # fmt: skip
            lane.wait_idle(deadline, self._clock)
            if lane.running and orderly:
                log.error(
                    "group %s: the callback of queue %s[%d] still runs after %.0f s; the queue "
                    "goes to its new owner, which may run later messages of it meanwhile",
                    self._config.group, naming.decode(lane.topic), lane.partition,
                    _ORDERLY_REVOKE_WAIT_S,
                )  # fmt: skip
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
        self._dispatcher.dispatch_due_retries()
        self._apply_backpressure()
        try:
            records = reading.fetch(self._client, _POLL_BATCH, _POLL_TIMEOUT_S)
        except KafkaException as exc:
            log.warning("consumer %s poll failed: %s", self._config.group, exc)
            self._stopping.wait(1.0)
            return
        if records:
            self._dispatch(records)
        now = self._clock.monotonic()
        if now - self._last_commit >= self._config.commit_interval_ms / 1000.0:
            self._last_commit = now
            self._commit(list(self._lanes.values()), synchronous=False)

    def _dispatch(self, records: list[KafkaRecord]) -> None:
        batches: dict[tuple[str, int], list[KafkaRecord]] = {}
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
            for record in batch:
                lane.track(record.offset(), self._config.group)  # type: ignore[arg-type]
            self._dispatcher.submit(lane, batch)

    def _on_record_error(self, error: KafkaError) -> None:
        """A consumer error event: logged once per kind, then once every 30 s with a count (a
        broker that is away repeats its errors every few hundred milliseconds)."""
        if error.code() == KafkaError._PARTITION_EOF:
            return
        held = self._errors.admit(shape(error.str()))
        if held is None:
            return
        more = f" ({held} more like it in the last 30 s)" if held else ""
        if error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            log.warning(
                "consumer %s: %s (waiting for the topic)%s", self._config.group, error.str(), more
            )
        else:
            log.error("consumer %s: %s%s", self._config.group, error.str(), more)

    def _apply_backpressure(self) -> None:
        """Pause the queues with too many unfinished messages; resume the others."""
        limit = self._config.max_in_flight_per_queue
        for lane in self._lanes.values():
            lane.settle()
            in_flight = lane.offsets.in_flight
            if not lane.paused and in_flight >= limit:
                lane.paused = True
            elif lane.paused and in_flight < limit // 2:
                lane.paused = False
        stop = {key for key, lane in self._lanes.items() if lane.paused}
        to_pause = [TopicPartition(*key) for key in stop - self._stopped]
        to_resume = [TopicPartition(*key) for key in self._stopped - stop]
        self._stopped = stop
        if to_pause:
            self._client.pause(to_pause)
        if to_resume:
            self._client.resume(to_resume)

    def _after_failure(self, lane: Lane, message: ReceivedMessage) -> bool:
        """A failed message: dropped (broadcasting) or sent back; False to retry it locally."""
        if self._broadcasting:
            self._stats.dropped += 1
            log.warning(
                "broadcasting consumer drops failed message %s (queue %d offset %d), "
                "as RocketMQ does",
                message.id,
                lane.partition,
                message.queue_offset,
            )
            return True
        if self._send_back is not None and self._send_back.send(message):
            self._stats.sent_back += 1
            return True
        return False

    # -- offsets ----------------------------------------------------------------------------

    def _commit(self, lanes: list[Lane], *, synchronous: bool) -> None:
        offsets = []
        for lane in lanes:
            lane.settle()
            position = lane.offsets.take_commit()
            if position is not None:
                offsets.append(TopicPartition(lane.topic, lane.partition, position))
        commit_positions(
            self._client, offsets, synchronous=synchronous, on_commit=self._on_commit,
            group=self._config.group,
        )  # fmt: skip

    def _on_commit(self, error: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """Kafka's answer to a commit (on the poll thread): a position it confirmed is not
        sent again; one it refused is sent again at the next commit."""
        if error is not None:
            if error.code() != KafkaError._NO_OFFSET:
                log.warning("consumer %s commit failed: %s", self._config.group, error.str())
            return
        for tp in partitions:
            lane = self._lanes.get((tp.topic, tp.partition))
            if lane is not None and tp.error is None and tp.offset >= 0:
                lane.offsets.committed(tp.offset)

    def _finish(self) -> None:
        lanes = list(self._lanes.values())
        deadline = self._clock.monotonic() + _SHUTDOWN_WAIT_S
        for lane in lanes:
            lane.wait_idle(deadline, self._clock)
        self._commit(lanes, synchronous=True)
        self._lanes.clear()
        try:
            self._client.close()
        except (KafkaException, RuntimeError) as exc:
            log.warning("consumer %s close failed: %s", self._config.group, exc)
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._send_back is not None:
            self._send_back.close()


def commit_positions(
    client: Consumer,
    offsets: list[TopicPartition],
    *,
    synchronous: bool,
    on_commit: Callable[[KafkaError | None, list[TopicPartition]], None],
    group: str,
) -> None:
    """Commit ``offsets``: synchronously (Kafka's answer goes to ``on_commit`` at once) or
    not (librdkafka calls ``on_commit`` from a later poll); a failure is logged."""
    if not offsets:
        return
    try:
        if synchronous:
            answer = client.commit(offsets=offsets, asynchronous=False)
            on_commit(None, list(answer or []))
        else:
            client.commit(offsets=offsets, asynchronous=True)
    except KafkaException as exc:
        log.warning("consumer %s commit failed: %s", group, exc)


def _received(lane: Lane, record: KafkaRecord) -> ReceivedMessage:
    ts_type, ts = record.timestamp()
    headers: Any = record.headers()
    if headers and naming.is_retry_topic(lane.subscription.topic):
        headers = property_bytes.restored(headers)
    return ReceivedMessage(
        topic=lane.subscription.topic,
        kafka_topic=lane.topic,
        body=record.value(),
        queue_id=lane.partition,
        queue_offset=record.offset(),  # type: ignore[arg-type]
        timestamp=ts,
        append_time=ts_type == TIMESTAMP_LOG_APPEND_TIME,
        headers=headers,
    )


def _describe(partitions: list[TopicPartition]) -> str:
    return ", ".join(f"{naming.decode(tp.topic)}[{tp.partition}]" for tp in partitions) or "-"
