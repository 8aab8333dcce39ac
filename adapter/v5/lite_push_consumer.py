"""``LitePushConsumer``: lite topics (RocketMQ 5.5, RIP-83) on Kafka, costing Kafka nothing.

Reproduces ``rocketmq.LitePushConsumer(client_configuration, consumer_group, bind_topic,
message_listener, max_cache_message_count=1024, max_cache_message_size=64 MiB,
consumption_thread_count=20, tls_enable=False)`` of rocketmq-python-client 5.1:
``startup()``, ``subscribe_lite(lite_topic)`` and ``unsubscribe_lite(lite_topic)`` (while
running; a blank or too long name is an ``IllegalStateException``, more than the quota a
``LiteSubscriptionQuotaExceededException``), ``subscribe``/``unsubscribe`` raising
``NotImplementedError``, ``shutdown()``.

A lite topic is not a Kafka topic: its messages are records of the parent (bind) topic, keyed
and routed by the lite topic's name (:mod:`adapter.v5.producer`), so each lite topic lives in
one partition, in send order, and a million of them cost Kafka one record of progress each
(:mod:`adapter.v5.lite_progress`). The consumer reads the parent's partitions that hold a lite
topic it subscribed, itself (a lite subscription belongs to one consumer, so no Kafka group
splits the partitions among its members), and hands the listener only the messages of its lite
topics (:mod:`adapter.v5.lite_book`): one lite topic's messages one at a time, in order;
different lite topics in parallel on ``consumption_thread_count`` threads. A message whose
listener answers ``FAILURE`` (or raises) is retried in place after its attempt's back-off
(1 s, 5 s, 10 s, ...), holding back its own lite topic only; after 17 attempts it goes to
``%DLQ%<group>`` and its lite topic goes on.

A lite topic subscribed for the first time by its group starts at the end of its partition:
messages sent to it before are not delivered to that group (RocketMQ keeps them for a later
subscriber). That start is saved at once, so a crash right after skips nothing sent since. A
lite topic the group consumed before resumes where it stopped.

A lite subscription is exclusive within its group, as in RocketMQ: the consumer that subscribed
a lite topic last takes it over, and the one before drops it as soon as it reads the claim
(:mod:`adapter.v5.lite_progress`; ``lite_topics`` says what a consumer holds). Meanwhile, and
from the progress saved last, a message may reach both (RocketMQ's notice is asynchronous too).

Known gaps: the quota is an adapter setting
(``max_lite_subscriptions``, default 100,000), not the server's. ``max_cache_message_size`` is
accepted and not applied. The proxy does not serve lite consumers yet.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka import Message as KafkaRecord

from adapter import naming
from adapter import properties as prop
from adapter.config import KafkaSettings, delay_levels_from_env
from adapter.consumer.config import ConsumerConfig
from adapter.consumer.send_back import SendBack
from adapter.exceptions import AdapterError, InvalidNameError
from adapter.kafka import clients
from adapter.kafka.metadata import MissingTopic, PartitionCounts
from adapter.producer.routing import queue_for_sharding_key
from adapter.v5 import lite_progress
from adapter.v5.client_configuration import ClientConfiguration, kafka_settings
from adapter.v5.client_id import new_client_id
from adapter.v5.exception import (
    IllegalArgumentException,
    IllegalStateException,
    LiteSubscriptionQuotaExceededException,
    NotFoundException,
    translate,
)
from adapter.v5.fetched import received
from adapter.v5.keyed_serial import KeyedSerial
from adapter.v5.lite_book import LiteBook
from adapter.v5.message import Message
from adapter.v5.message_listener import MessageListener, listen
from adapter.v5.push_consumer import retry_delay_s
from adapter.v5.share_group import ROCKETMQ_MAX_ATTEMPTS

__all__ = ["LitePushConsumer"]

log = logging.getLogger(__name__)

LITE_SUBSCRIPTION_QUOTA_EXCEEDED = 42902
TOPIC_NOT_FOUND = 40402
SAVE_EVERY_S = 1.0
_NEW_TOPIC_GRACE_S = 5.0
_POLL_S = 0.2


class LitePushConsumer:
    """Drop-in for ``rocketmq.LitePushConsumer``; endpoints are Kafka bootstrap servers.

    Adapter extension (keyword-only): ``max_lite_subscriptions``, the quota."""

    def __init__(
        self,
        client_configuration: ClientConfiguration,
        consumer_group: str,
        bind_topic: str,
        message_listener: MessageListener | None = None,
        max_cache_message_count: int = 1024,
        max_cache_message_size: int = 64 * 1024 * 1024,
        consumption_thread_count: int = 20,
        tls_enable: bool = False,
        *,
        max_lite_subscriptions: int = 100_000,
    ) -> None:
        if not bind_topic:
            raise IllegalArgumentException("bindTopic has not been set yet.")
        if message_listener is None:
            raise IllegalArgumentException("message_listener should not be null")
        if consumption_thread_count <= 0 or max_cache_message_count <= 0:
            raise IllegalArgumentException(
                "consumption_thread_count and max_cache_message_count must be positive"
            )
        self._configuration = client_configuration
        self._given_group = consumer_group
        self._group = client_configuration.named(consumer_group)
        try:
            naming.validate_group(self._group)
            self._topic = naming.kafka_topic(client_configuration.named(bind_topic))
        except InvalidNameError as exc:
            raise IllegalArgumentException(str(exc)) from exc
        self._listener = message_listener
        self._threads = consumption_thread_count
        self._max_cached = max_cache_message_count
        self._tls = tls_enable
        self._quota = max_lite_subscriptions
        self._levels = delay_levels_from_env()
        self._client_id = new_client_id()
        self._lock = threading.Lock()
        self._saving = threading.Lock()
        self._book = LiteBook()
        self._reading: dict[int, int] = {}
        """The partitions being read, and the next offset each is read from (the loop's)."""
        self._claims: dict[str, int] = {}
        """Each subscribed lite topic's claim: its offset in the progress topic."""
        self._to_sync: set[int] = set()
        """Partitions whose read position the loop must set again (a subscription changed)."""
        self._in_flight = 0
        self._stopping = threading.Event()
        self._loop: threading.Thread | None = None
        self._kafka: KafkaSettings | None = None
        self._partitions = 0
        self._lanes: KeyedSerial | None = None
        self._send_back: SendBack | None = None
        self._writer: lite_progress.ProgressWriter | None = None
        self._consumer: Consumer | None = None
        self._prober: Consumer | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    def startup(self) -> None:
        """Find the bind topic, load the group's progress and start reading;
        ``NotFoundException`` for a missing bind topic, ``IllegalStateException`` naming the
        cause when Kafka cannot be reached."""
        if self._loop is not None:
            raise IllegalStateException(f"{self} is already running")
        kafka = kafka_settings(self._configuration, tls=self._tls)
        timeout_s = max(5.0, float(self._configuration.request_timeout))
        conf = kafka.librdkafka({})
        try:
            self._partitions = self._partitions_of_bind_topic(conf, timeout_s)
            lite_progress.ensure_topic(conf, timeout_s)
            known, claims_from = lite_progress.load(conf, self._group, timeout_s)
            self._book.known(known)
            self._writer = lite_progress.ProgressWriter(conf, self._group)
            self._consumer = clients.consumer(
                {**conf, "group.id": self._group, "enable.auto.commit": False,
                 "isolation.level": "read_committed", "auto.offset.reset": "earliest"}
            )  # fmt: skip
            # Asks partitions' ends for subscribe_lite: the reader is busy on the loop's thread.
            self._prober = clients.consumer({**conf, "group.id": f"{self._group}%lite-ends"})
            # The claims of the group's other consumers, from now on (see lite_progress).
            self._consumer.assign([TopicPartition(lite_progress.TOPIC, 0, claims_from)])
            self._send_back = SendBack(
                ConsumerConfig(kafka, self._group, max_reconsume_times=ROCKETMQ_MAX_ATTEMPTS - 1)
            )
        except (AdapterError, KafkaException) as exc:
            raise IllegalStateException(f"{self} could not start: {exc}") from exc
        self._kafka = kafka
        self._lanes = KeyedSerial(self._threads, "v5-lite")
        self._stopping.clear()
        self._loop = threading.Thread(target=self._read, name=f"lite-{self._group}", daemon=True)
        self._loop.start()
        log.info("%s started (bind topic %s)", self, naming.decode(self._topic))

    def shutdown(self) -> None:
        """Stop reading, let the listener calls in flight end, save the progress, close."""
        loop, self._loop = self._loop, None
        if loop is None:
            log.warning("%s is not running, can't shutdown", self)
            return
        self._stopping.set()
        loop.join(30)
        if self._lanes is not None:
            self._lanes.shutdown()
        self._save(10.0)
        if self._writer is not None:
            self._writer.close(10.0)
        if self._send_back is not None:
            self._send_back.close()
        for client in (self._consumer, self._prober):
            if client is not None:
                client.close()
        log.info("%s shut down", self)

    # -- subscriptions ------------------------------------------------------------------------

    def subscribe_lite(self, lite_topic: str) -> None:
        """Receive ``lite_topic``'s messages from now on (or from where the group stopped)."""
        if self._loop is None:
            raise IllegalStateException(
                "unable to add lite subscription because consumer is not running"
            )
        with self._lock:
            if self._book.subscribed(lite_topic):
                return
        try:
            naming.validate_lite_topic(lite_topic)
        except InvalidNameError as exc:
            raise IllegalStateException(str(exc)) from exc
        with self._lock:
            if self._book.count() + 1 > self._quota:
                raise LiteSubscriptionQuotaExceededException(
                    f"Lite subscription exceed quota: {self._quota} ",
                    LITE_SUBSCRIPTION_QUOTA_EXCEEDED,
                )
        writer = self._writer
        if writer is None:
            raise IllegalStateException("consumer is not running")
        try:
            claim = writer.claim(lite_topic, self._client_id, self._timeout_s())
        except AdapterError as exc:
            raise translate(exc, f"subscribe lite topic {lite_topic}") from exc
        partition = queue_for_sharding_key(lite_topic, self._partitions)
        with self._lock:
            end = self._reading.get(partition)
        if end is None:  # not read yet: its end now
            end = self._end_of(partition)
        with self._lock:
            self._book.subscribe(lite_topic, partition, end)
            self._claims[lite_topic] = claim
            self._to_sync.add(partition)
        self._save(self._timeout_s())

    def unsubscribe_lite(self, lite_topic: str) -> None:
        if self._loop is None:
            raise IllegalStateException(
                "unable to remove lite subscription because consumer is not running"
            )
        with self._lock:
            if not self._book.subscribed(lite_topic):
                return
            self._book.unsubscribe(lite_topic)
            self._claims.pop(lite_topic, None)
            self._to_sync.add(queue_for_sharding_key(lite_topic, self._partitions))

    def _partitions_of_bind_topic(self, conf: dict[str, Any], timeout_s: float) -> int:
        """The bind topic's partition count; a topic made a moment ago may be unknown to the
        broker for a little while, so it is asked again for up to 5 s."""
        clients.reach(conf, timeout_s)
        counts = PartitionCounts(clients.admin(conf).list_topics, timeout_s)
        try:
            return counts.require(self._topic, wait_s=_NEW_TOPIC_GRACE_S)
        except MissingTopic as exc:
            raise NotFoundException(str(exc), TOPIC_NOT_FOUND) from exc

    def subscribe(self, topic: str, filter_expression: Any = None) -> None:
        raise NotImplementedError("LitePushConsumer does not support topic subscription.")

    def unsubscribe(self, topic: str) -> None:
        raise NotImplementedError("LitePushConsumer does not support topic unsubscription.")

    # -- properties ---------------------------------------------------------------------------

    @property
    def is_running(self) -> bool:
        return self._loop is not None

    @property
    def lite_topics(self) -> set[str]:
        """The lite topics subscribed now (adapter extension): another consumer of the group
        that subscribes one takes it from this one."""
        with self._lock:
            return set(self._claims)

    @property
    def client_id(self) -> str:
        return self._client_id

    @property
    def consumer_group(self) -> str:
        return self._given_group

    def __str__(self) -> str:
        return f"LITE_PUSH_CONSUMER:{self._group}, client_id:{self._client_id}"

    # -- the reading loop ---------------------------------------------------------------------

    def _end_of(self, partition: int) -> int:
        prober = self._prober
        if prober is None:
            raise IllegalStateException("consumer is not running")
        try:
            _low, high = prober.get_watermark_offsets(
                TopicPartition(self._topic, partition), timeout=10
            )
        except KafkaException as exc:
            raise translate(exc, f"read the end of {naming.decode(self._topic)}") from exc
        return int(high)

    def _read(self) -> None:
        consumer = self._consumer
        if consumer is None:
            return
        reading = self._reading  # this loop's alone to change (under the lock)
        paused = False
        saved_at = time.monotonic()
        while not self._stopping.is_set():
            try:
                self._sync(consumer)
                with self._lock:
                    full = self._in_flight >= self._max_cached
                    roomy = self._in_flight < self._max_cached // 2
                if reading and (full and not paused or paused and roomy):
                    parts = [TopicPartition(self._topic, p) for p in reading]
                    (consumer.pause if full else consumer.resume)(parts)
                    paused = full
                records = consumer.consume(500, _POLL_S)
                for record in records:
                    self._take(record)
                if time.monotonic() - saved_at >= SAVE_EVERY_S:
                    self._save(5.0)
                    saved_at = time.monotonic()
            except Exception:  # logged; the loop goes on
                log.exception("%s: reading failed; trying again in 1 s", self)
                self._stopping.wait(1.0)

    def _sync(self, consumer: Consumer) -> None:
        """Start, move or stop reading the partitions whose subscriptions changed."""
        with self._lock:
            todo, self._to_sync = self._to_sync, set()
            starts = {p: self._book.start(p) for p in todo}
        for partition, start in starts.items():
            self._move(consumer, partition, start)

    def _move(self, consumer: Consumer, partition: int, start: int | None) -> None:
        reading = self._reading
        where = TopicPartition(self._topic, partition, start if start is not None else 0)
        if start is None:
            with self._lock:
                was = reading.pop(partition, None)
            if was is not None:
                consumer.incremental_unassign([where])
        elif partition not in reading:
            consumer.incremental_assign([where])
            with self._lock:
                reading[partition] = start
        elif start < reading[partition]:
            consumer.seek(where)
            with self._lock:
                reading[partition] = start

    def _take(self, record: KafkaRecord) -> None:
        error = record.error()
        if error is not None:
            if error.code() != KafkaError._PARTITION_EOF:
                log.warning("%s: %s", self, error.str())
            return
        partition, offset = int(record.partition() or 0), int(record.offset() or 0)
        if record.topic() == lite_progress.TOPIC:
            self._on_claim(lite_progress.claimed(self._group, record.key()), record, offset)
            return
        headers = dict(record.headers() or [])
        lite_bytes = headers.get(prop.LITE_TOPIC)
        if isinstance(lite_bytes, bytes):
            lite_bytes = lite_bytes.decode(errors="replace")
        lanes = self._lanes
        with self._lock:
            if partition in self._reading:
                self._reading[partition] = offset + 1
            if lanes is None or not lite_bytes or not self._book.hand(lite_bytes, offset):
                return
            subscription = self._book.subscription(lite_bytes)
            self._in_flight += 1
        lite = lite_bytes
        lanes.submit(lite, lambda: self._consume(lite, subscription, record))

    def _on_claim(self, lite: str | None, record: KafkaRecord, offset: int) -> None:
        """Another consumer's later claim of a lite topic of this one's takes it over."""
        owner = (record.value() or b"").decode(errors="replace")
        if lite is None or owner == self._client_id:
            return
        with self._lock:
            if lite not in self._claims or offset < self._claims[lite]:
                return
            del self._claims[lite]
            self._book.unsubscribe(lite)
            self._to_sync.add(queue_for_sharding_key(lite, self._partitions))
        log.info("%s: lite topic %s taken over by %s", self, lite, owner)

    def _timeout_s(self) -> float:
        return max(5.0, float(self._configuration.request_timeout))

    def _consume(self, lite: str, subscription: int | None, record: KafkaRecord) -> None:
        """The listener on one message until it succeeds, or its attempts run out (then the
        dead-letter topic); its lite topic waits meanwhile. A message handed over under an
        earlier subscription is skipped: the subscription now reads it again."""
        offset = int(record.offset() or 0)
        attempt, done = 1, False
        try:
            while not self._stopping.is_set():
                with self._lock:
                    if self._book.subscription(lite) != subscription:
                        return  # unsubscribed meanwhile: left for a later subscription
                message = Message.from_received(received(record, attempt), delivery_attempt=attempt)
                if listen(self._listener, message, self):
                    done = True
                    return
                if attempt >= ROCKETMQ_MAX_ATTEMPTS and self._send_back is not None:
                    why = f"consumed {attempt} times without success"
                    self._send_back.dead_letter(received(record, attempt), why)
                    done = True
                    return
                self._stopping.wait(retry_delay_s(attempt, self._levels))
                attempt += 1
        finally:
            with self._lock:
                if done:
                    self._book.consumed(lite, offset)
                self._in_flight -= 1

    def _save(self, timeout_s: float) -> None:
        with self._saving:  # one save at a time: a later progress is never written first
            with self._lock:
                moved = self._book.changed()
            if moved and self._writer is not None:
                self._writer.save(moved, timeout_s)
