"""``Producer``: normal, oneway and orderly sends on Kafka.

Reproduces ``rocketmq.client.Producer`` of rocketmq-client-python 2.0:

- ``send_sync`` waits for the broker's acknowledgement (acks=all, idempotent producer) and
  returns ``SendResult(status, msg_id, offset)``, ``msg_id`` being the message's ``UNIQ_KEY``
  and ``offset`` its Kafka offset (RocketMQ's queue offset).
- ``send_oneway`` hands the message to the client and returns; delivery failures are logged
  and counted, never raised, as RocketMQ's oneway send does not report them either.
- ``send_orderly_with_sharding_key`` picks the queue with RocketMQ's hash rule
  (:mod:`adapter.routing`) and waits for the acknowledgement, so messages of one key stay in
  one queue in send order.
- The send timeout (default 3000 ms, ``set_timeout``) bounds each send, retries included;
  bodies larger than ``max_message_size`` (default 4 MiB) are refused before sending.

Known gaps: queues are Kafka partitions, so a topic's queue count is its partition count.
A normal send spreads messages with librdkafka's sticky partitioner rather than RocketMQ's
strict round-robin. A message with a delay level (``set_delay_time_level(n)``, n > 0, clamped
to the highest level) is written to ``SCHEDULE_TOPIC_XXXX`` partition n - 1 as a
``ScheduledMessage``, as RocketMQ's broker parks it; the schedule forwarder delivers it.
"""

from __future__ import annotations

import logging
import threading
import time
from enum import IntEnum
from types import TracebackType
from typing import Any, NamedTuple, Self

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import Message as KafkaMessage
from confluent_kafka import Producer as KafkaProducer

from adapter import codec, naming
from adapter import properties as prop
from adapter.client_settings import ClientSettings
from adapter.config import KafkaSettings, ProducerConfig, delay_levels_from_env
from adapter.exceptions import (
    AdapterError,
    InvalidMessageError,
    MessageTooLargeError,
    ProducerException,
    ProducerSendOnewayFailed,
    ProducerSendOrderlyFailed,
    ProducerSendSyncFailed,
    ProducerStartFailed,
)
from adapter.message import Headers, Message
from adapter.msgid import new_message_id
from adapter.routing import queue_for_sharding_key
from adapter.schedule.envelope import scheduled
from adapter.topics import check_schedule_partitions, schedule_partitions

log = logging.getLogger(__name__)

_METADATA_TTL_S = 30.0
_SCHEDULE = naming.kafka_topic(naming.SCHEDULE_TOPIC)


class SendStatus(IntEnum):
    OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3


class SendResult(NamedTuple):
    status: SendStatus
    msg_id: str
    offset: int


class _Delivery:
    """Receives one delivery report."""

    __slots__ = ("error", "offset", "partition", "done", "event")

    def __init__(self) -> None:
        self.error: KafkaError | None = None
        self.offset = -1
        self.partition = -1
        self.done = False
        self.event = threading.Event()

    def __call__(self, err: KafkaError | None, msg: KafkaMessage) -> None:
        self.error = err
        if err is None:
            self.offset = msg.offset() or 0
            self.partition = msg.partition() or 0
        self.done = True
        self.event.set()


class Producer(ClientSettings):
    """Drop-in for ``rocketmq.client.Producer``; Kafka bootstrap servers stand for name servers."""

    _wait_by_flush = True
    """How a synchronous send waits: ``flush()`` (one sender at a time), or for its own
    delivery report, served by a poller thread of the subclass."""

    def __init__(
        self,
        group_id: str,
        orderly: bool = False,
        timeout: int | None = None,
        compress_level: int | None = None,
        max_message_size: int | None = None,
    ) -> None:
        self._group = group_id
        self._orderly = orderly
        self._instance_name = "DEFAULT"
        self._bootstrap: str | None = None
        self._timeout_ms = timeout
        self._compress_level = compress_level
        self._max_message_size = max_message_size
        self._config: ProducerConfig | None = None
        self._client: KafkaProducer | None = None
        self._partitions: dict[str, tuple[float, int]] = {}
        self._lock = threading.Lock()
        self.oneway_failures = 0

    # -- settings ---------------------------------------------------------------------------

    def set_timeout(self, timeout: int) -> None:
        """Send timeout in milliseconds (RocketMQ's sendMsgTimeout, default 3000)."""
        self._timeout_ms = timeout

    def set_compress_level(self, level: int) -> None:
        """zlib level 0..9; sends are then gzip-compressed by Kafka at that level."""
        self._compress_level = level

    def set_max_message_size(self, max_size: int) -> None:
        """Largest body accepted, in bytes (default 4 MiB)."""
        self._max_message_size = max_size

    # -- lifecycle --------------------------------------------------------------------------

    def _build_config(self) -> ProducerConfig:
        naming.validate_group(self._group)
        kwargs: dict[str, Any] = {}
        if self._timeout_ms is not None:
            kwargs["send_timeout_ms"] = self._timeout_ms
        if self._max_message_size is not None:
            kwargs["max_message_size"] = self._max_message_size
        if self._compress_level is not None:
            kwargs["compress_level"] = self._compress_level
        return ProducerConfig(
            KafkaSettings.from_env(self._bootstrap),
            self._group,
            self._instance_name,
            delay_levels=delay_levels_from_env(),
            **kwargs,
        )

    def start(self) -> None:
        if self._client is not None:
            return
        try:
            self._config = self._build_config()
            self._client = KafkaProducer(self._config.librdkafka(), logger=log)
        except (AdapterError, KafkaException) as exc:
            raise ProducerStartFailed(f"producer {self._group!r} could not start: {exc}") from exc

    def shutdown(self) -> None:
        client, self._client = self._client, None
        if client is None:
            return
        timeout_s = self._send_timeout_s()
        remaining = client.flush(timeout_s)
        if remaining:
            log.error("producer %s shut down with %d messages undelivered", self._group, remaining)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()

    # -- sending ----------------------------------------------------------------------------

    def send_sync(self, msg: Message) -> SendResult:
        return self._send_and_wait(msg, None, ProducerSendSyncFailed)

    def send_orderly_with_sharding_key(self, msg: Message, sharding_key: str) -> SendResult:
        client = self._require_client(ProducerSendOrderlyFailed)
        try:
            topic = naming.sendable_kafka_topic(msg.topic)
            queue = queue_for_sharding_key(sharding_key, self._queue_count(client, topic))
        except (AdapterError, KafkaException) as exc:
            raise ProducerSendOrderlyFailed(str(exc)) from exc
        return self._send_and_wait(msg, queue, ProducerSendOrderlyFailed, key=sharding_key)

    def send_oneway(self, msg: Message) -> None:
        client = self._require_client(ProducerSendOnewayFailed)
        topic, value = self._checked(msg, ProducerSendOnewayFailed)
        msg_id = new_message_id()
        partition = -1  # librdkafka's "any partition"
        if msg.delay_time_level > 0:
            topic, value, headers, partition = self._delayed(
                client, msg, msg_id, ProducerSendOnewayFailed
            )
        else:
            headers = msg.headers(msg_id)
        deadline = 0.0
        while True:
            try:
                client.produce(
                    topic,
                    value,
                    partition=partition,
                    headers=headers,
                    on_delivery=self._on_oneway_delivery,
                )
                break
            except BufferError:
                # The local queue is full: serve delivery reports until there is room.
                now = time.monotonic()
                if not deadline:
                    deadline = now + self._send_timeout_s()
                elif now > deadline:
                    raise ProducerSendOnewayFailed(
                        f"local send queue stayed full for {self._send_timeout_s()} s"
                    ) from None
                client.poll(0.05)
            except KafkaException as exc:
                raise ProducerSendOnewayFailed(str(exc)) from exc
        client.poll(0)

    def flush(self, timeout: float | None = None) -> int:
        """Wait for outstanding oneway sends; returns how many are still undelivered."""
        client = self._client
        if client is None:
            return 0
        return int(client.flush(self._send_timeout_s() if timeout is None else timeout))

    # -- internals --------------------------------------------------------------------------

    def _require_client(self, error: type[ProducerException]) -> KafkaProducer:
        client = self._client
        if client is None:
            raise error(f"producer {self._group!r} is not started; call start() first")
        return client

    def _send_timeout_s(self) -> float:
        config = self._config
        return (config.send_timeout_ms if config else 3000) / 1000.0

    def _checked(self, msg: Message, error: type[ProducerException]) -> tuple[str, bytes]:
        """The Kafka topic and body of a sendable message; ``error`` with the reason if not."""
        config = self._config
        if config is None:
            raise error(f"producer {self._group!r} is not started; call start() first")
        body = msg.body
        try:
            topic = naming.sendable_kafka_topic(msg.topic)
            if len(body) > config.max_message_size:
                raise MessageTooLargeError(
                    f"the message body size over max value, MAX: {config.max_message_size}, "
                    f"got {len(body)}",
                    topic=msg.topic,
                )
            if not body:
                raise InvalidMessageError("the message body is empty", topic=msg.topic)
        except AdapterError as exc:
            raise error(str(exc)) from exc
        return topic, body

    def _delayed(
        self,
        client: KafkaProducer,
        msg: Message,
        msg_id: str,
        error: type[ProducerException],
        queue: int | None = None,
        key: str | None = None,
    ) -> tuple[str, bytes, Headers, int]:
        """A delayed message as its ``SCHEDULE_TOPIC_XXXX`` record: topic, value, headers and
        partition (level - 1), as RocketMQ's delay hook parks it."""
        config = self._config
        if config is None:
            raise error(f"producer {self._group!r} is not started; call start() first")
        levels = config.delay_levels
        level = levels.clamp(msg.delay_time_level)
        try:
            check_schedule_partitions(self._schedule_queue_count(client), levels)
            record = scheduled(
                msg,
                level=level,
                unique_key=msg_id,
                born_ms=time.time_ns() // 1_000_000,
                queue_id=-1 if queue is None else queue,
                key=key.encode() if key is not None else None,
            )
            value = codec.encode(record)
        except (AdapterError, KafkaException) as exc:
            raise error(str(exc)) from exc
        headers: Headers = [(prop.UNIQ_KEY, msg_id.encode()), (prop.DELAY, str(level).encode())]
        return _SCHEDULE, value, headers, level - 1

    def _send_and_wait(
        self,
        msg: Message,
        partition: int | None,
        error: type[ProducerException],
        key: str | None = None,
    ) -> SendResult:
        client = self._require_client(error)
        topic, value = self._checked(msg, error)
        msg_id = new_message_id()
        delivery = _Delivery()
        kwargs: dict[str, Any] = {"on_delivery": delivery}
        if msg.delay_time_level > 0:
            topic, value, kwargs["headers"], kwargs["partition"] = self._delayed(
                client, msg, msg_id, error, partition, key
            )
        else:
            kwargs["headers"] = msg.headers(msg_id)
            if partition is not None:
                kwargs["partition"] = partition
            if key is not None:
                kwargs["key"] = key
        self._produce_and_wait(client, topic, value, kwargs, error, f"{msg_id} to {msg.topic}")
        return SendResult(SendStatus.OK, msg_id, delivery.offset)

    def _produce_and_wait(
        self,
        client: KafkaProducer,
        topic: str,
        value: bytes,
        kwargs: dict[str, Any],
        error: type[ProducerException],
        what: str,
    ) -> None:
        """Produce one record and wait for its acknowledgement; ``kwargs["on_delivery"]`` is
        the record's own :class:`_Delivery`. ``error`` (naming ``what``) when it fails."""
        delivery: _Delivery = kwargs["on_delivery"]
        timeout_s = self._send_timeout_s()
        try:
            client.produce(topic, value, **kwargs)
        except BufferError:
            client.flush(timeout_s)
            try:
                client.produce(topic, value, **kwargs)
            except BufferError as exc:
                raise error(f"local send queue full: {exc}") from exc
        except KafkaException as exc:
            raise error(str(exc)) from exc
        deadline = time.monotonic() + timeout_s + 1.0
        while not delivery.done:
            if self._wait_by_flush:
                # flush() sends at once, ignoring linger.ms: what one synchronous sender wants.
                client.flush(max(0.0, deadline - time.monotonic()))
            else:
                # A poller thread serves the reports; flush() would also wait for every other
                # thread's records.
                delivery.event.wait(max(0.0, deadline - time.monotonic()))
            if time.monotonic() > deadline:
                break
        if not delivery.done:
            raise error(f"no acknowledgement within {timeout_s} s for {what}")
        if delivery.error is not None:
            cause = KafkaException(delivery.error)
            raise error(f"send of {what} failed: {delivery.error.str()}") from cause

    def _on_oneway_delivery(self, err: KafkaError | None, msg: KafkaMessage) -> None:
        if err is not None:
            self.oneway_failures += 1
            log.warning("oneway send to %s failed: %s", msg.topic(), err.str())

    def _schedule_queue_count(self, client: KafkaProducer) -> int:
        """SCHEDULE_TOPIC_XXXX's partition count (0 if missing), cached like other topics'."""
        now = time.monotonic()
        cached = self._partitions.get(_SCHEDULE)
        if cached is not None and cached[0] > now:
            return cached[1]
        count = schedule_partitions(client, self._send_timeout_s())
        if count:
            with self._lock:
                self._partitions[_SCHEDULE] = (now + _METADATA_TTL_S, count)
        return count

    def _queue_count(self, client: KafkaProducer, topic: str) -> int:
        now = time.monotonic()
        cached = self._partitions.get(topic)
        if cached is not None and cached[0] > now:
            return cached[1]
        metadata = client.list_topics(topic, timeout=self._send_timeout_s())
        info = metadata.topics.get(topic)
        if info is None or info.error is not None or not info.partitions:
            reason = info.error.str() if info is not None and info.error else "no partitions"
            raise AdapterError(f"topic {topic!r} is not available: {reason}", topic=topic)
        count = len(info.partitions)
        with self._lock:
            self._partitions[topic] = (now + _METADATA_TTL_S, count)
        return count
