"""The send core both producers use, by composition: one Kafka producer and what a send checks.

Reproduces the sending half of RocketMQ's ``DefaultMQProducerImpl``:

- ``send_sync`` waits for the broker's acknowledgement (acks=all, idempotent producer) and
  returns ``SendResult(status, msg_id, offset)``, ``msg_id`` being the message's ``UNIQ_KEY``
  and ``offset`` its Kafka offset (RocketMQ's queue offset). The ``UNIQ_KEY`` is made at a
  message's first send and kept (RocketMQ's ``MessageClientIDSetter``): a message sent again
  after a failure has the same id;
- ``send_oneway`` hands the message to the client and returns; delivery failures are logged
  and counted, never raised, as RocketMQ's oneway send does not report them either;
- orderly sends pick the queue with RocketMQ's hash rule (:mod:`adapter.producer.routing`);
- the send timeout (default 3000 ms) bounds each send, retries included; bodies larger than
  ``max_message_size`` (default 4 MiB) and empty bodies are refused before sending;
- a message with a delay level (clamped to the highest) is parked as a ``ScheduledMessage`` on
  ``SCHEDULE_TOPIC_XXXX`` partition level - 1, as RocketMQ's broker parks it.

Known gaps: queues are Kafka partitions, so a topic's queue count is its partition count. A
normal send spreads messages with librdkafka's sticky partitioner rather than RocketMQ's strict
round-robin.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from enum import IntEnum
from typing import Any, NamedTuple

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import Message as KafkaRecord

from adapter import naming
from adapter import properties as prop
from adapter.clock import SYSTEM_CLOCK, Clock
from adapter.exceptions import (
    AdapterError,
    DeliveryError,
    InvalidMessageError,
    MessageTooLargeError,
    ProducerException,
)
from adapter.kafka import clients, schemas, writing
from adapter.kafka.metadata import PartitionCounts
from adapter.kafka.priority_bands import PriorityBands
from adapter.kafka.topics import check_schedule_partitions
from adapter.message import Message
from adapter.producer import routing
from adapter.producer.config import ProducerConfig
from adapter.schedule.envelope import scheduled
from adapter.schedule.signing import signed
from adapter.wire import codec

log = logging.getLogger(__name__)

SCHEDULE = naming.kafka_topic(naming.SCHEDULE_TOPIC)


class SendStatus(IntEnum):
    """``rocketmq.client.SendStatus``."""

    OK = 0
    FLUSH_DISK_TIMEOUT = 1
    FLUSH_SLAVE_TIMEOUT = 2
    SLAVE_NOT_AVAILABLE = 3


class SendResult(NamedTuple):
    """``rocketmq.client.SendResult``."""

    status: SendStatus
    msg_id: str
    offset: int


class Outgoing(NamedTuple):
    """A message ready to produce: where it goes and what it carries."""

    topic: str
    value: bytes
    headers: prop.Headers
    partition: int | None
    key: bytes | None
    timestamp: int | None = None
    """The record's CreateTime (ms); None: the client's clock at produce."""

    def produce_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of ``produce`` beyond topic and value."""
        kwargs = writing.produce_kwargs(self.headers, self.partition, self.key)
        if self.timestamp is not None:
            kwargs["timestamp"] = self.timestamp
        return kwargs


class Sender:
    """One Kafka producer and the rules of a send. ``reports_served``: a thread of its own
    serves delivery reports, and each application thread waits for its own record; otherwise
    a synchronous send serves the reports itself until its own has come (the producer then
    has no linger, so the record goes out at once). Either way a send waits for its own
    record only, not behind records queued before it."""

    def __init__(
        self,
        config: ProducerConfig,
        *,
        settings: Mapping[str, Any] | None = None,
        reports_served: bool = False,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.config = config
        self.clock = clock
        conf = config.librdkafka()
        if not reports_served:
            conf["linger.ms"] = 0  # a synchronous send goes out at once
        conf.update(settings or {})
        conf.update(config.kafka.extra)  # the user's settings win
        self.client = clients.producer(conf, announce=True)
        self.timeout_s = config.send_timeout_ms / 1000
        # Readers must find this release's schemas before its first record (schema evolution).
        schemas.install(config.kafka).wait(min(self.timeout_s, schemas.START_WAIT_S))
        self.topics = PartitionCounts(self.client.list_topics, timeout_s=self.timeout_s)
        self.bands = PriorityBands(self.client.list_topics, timeout_s=self.timeout_s)
        self.oneway_failures = 0
        self._cluster_id: str | None = None
        self._reports_served = reports_served
        self._serving = threading.Event()
        self._poller: threading.Thread | None = None
        if reports_served:
            self._serving.set()
            self._poller = threading.Thread(
                target=self._serve_reports, name=f"reports-{config.group}", daemon=True
            )
            self._poller.start()

    @property
    def address(self) -> str:
        return self.config.kafka.bootstrap_servers

    def cluster_id(self) -> str:
        """The Kafka cluster's id, asked once (``KafkaException`` when Kafka cannot tell
        within the send timeout)."""
        if self._cluster_id is None:
            metadata = self.client.list_topics(timeout=self.timeout_s)
            self._cluster_id = str(metadata.cluster_id or "")
        return self._cluster_id

    def _serve_reports(self) -> None:
        while self._serving.is_set():
            self.client.poll(0.1)

    def close(self) -> int:
        """Deliver what is queued (up to the send timeout); how many records were not."""
        self._serving.clear()
        if self._poller is not None:
            self._poller.join(self.timeout_s + 1)
        return int(self.client.flush(self.timeout_s))

    # -- building a record ------------------------------------------------------------------

    def check(self, msg: Message) -> str:
        """The Kafka topic of a sendable ``msg``; ``AdapterError`` with the rule it breaks."""
        topic = naming.sendable_kafka_topic(msg.topic)
        size = len(msg.body)
        if size > self.config.max_message_size:
            raise MessageTooLargeError(
                f"the message body size over max value, MAX: {self.config.max_message_size}, "
                f"got {size}",
                topic=msg.topic,
            )
        if not size:
            raise InvalidMessageError("the message body is empty", topic=msg.topic)
        return topic

    def record(
        self,
        msg: Message,
        msg_id: str,
        error: type[ProducerException],
        *,
        partition: int | None = None,
        key: str | None = None,
    ) -> Outgoing:
        """``msg`` as the record to produce (its SCHEDULE record when delayed); ``error`` with
        the reason when it cannot be sent."""
        try:
            topic = self.check(msg)
            key_bytes = key.encode() if key is not None else None
            if msg.delay_time_level <= 0:
                return Outgoing(topic, msg.body, msg.headers(msg_id), partition, key_bytes)
            levels = self.config.delay_levels
            level = levels.clamp(msg.delay_time_level)
            check_schedule_partitions(self.topics, levels)
            parked = scheduled(
                msg,
                level=level,
                unique_key=msg_id,
                born_ms=self.clock.now_ms(),
                queue_id=-1 if partition is None else partition,
                key=key_bytes,
            )
            value = codec.encode(parked)
            headers = [(prop.UNIQ_KEY, msg_id.encode()), (prop.DELAY, str(level).encode())]
            headers += signed(value, self.config.schedule_signer)
            return Outgoing(SCHEDULE, value, headers, level - 1, None)
        except (AdapterError, KafkaException) as exc:
            raise error(self.with_address(exc)) from exc

    def queue_for(self, msg: Message, sharding_key: str, error: type[ProducerException]) -> int:
        """The queue of ``sharding_key`` among ``msg``'s topic's queues (RocketMQ's hash)."""
        try:
            topic = naming.sendable_kafka_topic(msg.topic)
            count = self.topics.require(topic, create=True, wait_s=self.timeout_s)
            return routing.queue_for_sharding_key(sharding_key, count)
        except (AdapterError, KafkaException) as exc:
            raise error(self.with_address(exc)) from exc

    # -- sending ----------------------------------------------------------------------------

    def send_sync(
        self,
        msg: Message,
        error: type[ProducerException],
        *,
        partition: int | None = None,
        key: str | None = None,
    ) -> SendResult:
        msg_id = msg.unique_key()
        record = self.record(msg, msg_id, error, partition=partition, key=key)
        ack = self.produce_and_ack(record, error, f"{msg_id} to {msg.topic}")
        return SendResult(SendStatus.OK, msg_id, ack.offset)

    def produce_and_ack(
        self, record: Outgoing, error: type[ProducerException], what: str
    ) -> writing.Ack:
        kwargs = record.produce_kwargs()
        try:
            return writing.produce_and_ack(
                self.client,
                record.topic,
                record.value,
                timeout_s=self.timeout_s,
                reports_served=self._reports_served,
                flush=False,
                what=what,
                **kwargs,
            )
        except (AdapterError, KafkaException) as exc:
            raise error(self.with_address(exc)) from exc

    async def produce_and_await(
        self, record: Outgoing, error: type[ProducerException], what: str
    ) -> writing.Ack:
        """:meth:`produce_and_ack` for an asyncio task (a sender whose reports are served)."""
        if not self._reports_served:
            raise RuntimeError("produce_and_await needs a sender whose reports are served")
        try:
            return await writing.produce_and_await(
                self.client,
                record.topic,
                record.value,
                timeout_s=self.timeout_s,
                what=what,
                **record.produce_kwargs(),
            )
        except (AdapterError, KafkaException) as exc:
            raise error(self.with_address(exc)) from exc

    def send_oneway(self, msg: Message, error: type[ProducerException]) -> None:
        record = self.record(msg, msg.unique_key(), error)
        self.produce_oneway(record, error)

    def produce_oneway(
        self,
        record: Outgoing,
        error: type[ProducerException],
        on_delivery: Any = None,
    ) -> None:
        """Hand ``record`` to the client without waiting; a failure is counted and logged."""
        kwargs = record.produce_kwargs()
        kwargs["on_delivery"] = on_delivery or self._on_oneway_delivery
        try:
            writing.produce(
                self.client, record.topic, record.value, timeout_s=self.timeout_s, **kwargs
            )
        except (AdapterError, KafkaException) as exc:
            raise error(self.with_address(exc)) from exc
        if not self._reports_served:
            self.client.poll(0)

    def _on_oneway_delivery(self, err: KafkaError | None, msg: KafkaRecord) -> None:
        if err is not None:
            self.oneway_failures += 1
            log.warning("oneway send to %s failed: %s", naming.decode(msg.topic() or ""), err.str())

    def with_address(self, exc: BaseException) -> str:
        """``exc`` as text, naming the Kafka address when Kafka is the cause."""
        text = str(exc)
        if isinstance(exc, (KafkaException, DeliveryError)) and self.address not in text:
            text = f"{text} (Kafka at {self.address})"
        return text
