"""``PushConsumer``: the 5.x push consumer on Kafka, run by the 2.0 consumer's core.

Reproduces ``rocketmq.v5.consumer.PushConsumer(client_configuration, consumer_group,
message_listener, subscription, max_cache_message_count=1024,
max_cache_message_size=64 MiB, consumption_thread_count=20, tls_enable=False)`` of
rocketmq-python-client 5.1.2 (a listener and a subscription are required:
``IllegalArgumentException``): ``subscribe(topic, filter_expression)``, ``unsubscribe``,
``startup()``, ``shutdown()``, ``is_running``, ``client_id``, ``consumer_group``, ``fifo``.

Underneath is the 2.0 ``PushConsumer``'s core, not a third consumer: the poll loop
(:mod:`adapter.consumer.loop`) on a Kafka consumer group named like the RocketMQ group, the
dispatcher (:mod:`adapter.consumer.dispatch`) and the send-back (:mod:`adapter.consumer.
send_back`). So a message is delivered to one member of the group; the listener sees the 5.x
:class:`~adapter.v5.Message` with ``delivery_attempt`` = reconsume times + 1; ``FAILURE`` (or
an exception) sends it back through ``%RETRY%<group>`` (SCHEDULE, delay level 3 + reconsume
times: 10 s, 30 s, 1 min, ...) and after ``max_delivery_attempts`` (default 17: one delivery
and RocketMQ 5's 16 retries) it goes to ``%DLQ%<group>``, the topics the 2.0 consumer uses.
Filters are tag or SQL92 expressions (:class:`~adapter.v5.FilterExpression`); a message
filtered out is consumed unseen and counted in ``stats.filtered``.

A topic made for priorities (RIP-80; band topics, :mod:`adapter.priorities`) is consumed with
all its bands, found at ``startup()``: while a higher band holds records this consumer has not
fetched, the lower bands wait (:mod:`adapter.consumer.priority_hold`), up to 10 s at a time;
within a band, records are fetched in order. The listener's threads run what was fetched, so
with ``consumption_thread_count=1`` messages arrive in exactly that order.

FIFO (adapter extension ``fifo=True``; RocketMQ 5 reads it from the group's settings on the
broker, which Kafka groups do not have): each partition is consumed by one thread in order, so
the messages of one ``message_group`` (one partition, see :mod:`adapter.v5.producer`) arrive one
at a time in send order, and a failing message is retried in place after 1 s, holding back its
partition and no other.

Known gaps: the retry back-off is RocketMQ 4's delay levels, not a 5.x group's customised
policy. A FIFO message is retried in place without limit (the 2.0 orderly core), where a 5.x
FIFO group moves it to the dead-letter topic after its max attempts. ``max_cache_message_count``
and ``..._size`` are accepted and not applied (the core bounds messages in flight per queue).
Subscribing or unsubscribing while running restarts the Kafka group member (a rebalance).
Bands created after ``startup()`` are consumed after the next restart or subscribe. A FIFO
consumer runs each band's queues on threads of their own, so the bands overlap a little. A
failed message comes back through the group's retry topic, where priorities are not kept
(as in RocketMQ, apache/rocketmq#10350). Messages already fetched (up to 1,000 per queue) are
not overtaken by a higher band's that arrive later, as in RocketMQ's client cache.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import replace
from typing import Any

from confluent_kafka import KafkaException

from adapter import naming
from adapter.config import delay_levels_from_env
from adapter.consumer.config import ConsumerConfig
from adapter.consumer.dispatch import ConsumerStats, ConsumeStatus, Subscription
from adapter.consumer.loop import ConsumeLoop
from adapter.exceptions import AdapterError, InvalidNameError
from adapter.kafka import clients
from adapter.kafka.priority_bands import PriorityBands
from adapter.message import ReceivedMessage
from adapter.v5.client_configuration import ClientConfiguration, kafka_settings
from adapter.v5.client_id import new_client_id
from adapter.v5.exception import IllegalArgumentException, IllegalStateException, translate
from adapter.v5.filter_expression import FilterExpression
from adapter.v5.message import Message
from adapter.v5.message_listener import MessageListener, as_status

__all__ = ["PushConsumer"]

log = logging.getLogger(__name__)

DEFAULT_MAX_DELIVERY_ATTEMPTS = 17
"""One delivery and RocketMQ 5's default of 16 retries for a push consumer group."""


class PushConsumer:
    """Drop-in for ``rocketmq.v5.consumer.PushConsumer``."""

    def __init__(
        self,
        client_configuration: ClientConfiguration,
        consumer_group: str,
        message_listener: MessageListener,
        subscription: dict[str, FilterExpression],
        max_cache_message_count: int = 1024,
        max_cache_message_size: int = 64 * 1024 * 1024,
        consumption_thread_count: int = 20,
        tls_enable: bool = False,
        *,
        fifo: bool = False,
        max_delivery_attempts: int = DEFAULT_MAX_DELIVERY_ATTEMPTS,
    ) -> None:
        if not message_listener:
            raise IllegalArgumentException("message_listener should not be null")
        if not subscription:
            raise IllegalArgumentException("subscription should not be null")
        if consumption_thread_count <= 0:
            raise IllegalArgumentException(
                f"consumption_thread_count must be positive, got {consumption_thread_count}"
            )
        if max_delivery_attempts < 1:
            raise IllegalArgumentException(
                f"max_delivery_attempts must be 1 or more, got {max_delivery_attempts}"
            )
        self._configuration = client_configuration
        self._given_group = consumer_group
        self._group = client_configuration.named(consumer_group)
        self._listener = message_listener
        self._subscription: dict[str, Subscription] = {}
        """The 2.0 core's subscriptions, by RocketMQ topic (names and filters checked)."""
        self._threads = consumption_thread_count
        self._tls = tls_enable
        self._fifo = fifo
        self._max_attempts = max_delivery_attempts
        self._client_id = new_client_id()
        self._loop: ConsumeLoop | None = None
        self._lock = threading.Lock()
        self.stats = ConsumerStats()
        """Counters of the core (consumed, failed, filtered, sent back): adapter extension."""
        for topic, expression in subscription.items():
            self._add(topic, expression)

    # -- what the application calls ------------------------------------------------------------

    def subscribe(self, topic: str, filter_expression: FilterExpression | None = None) -> None:
        """Consume ``topic``, keeping the messages ``filter_expression`` (default: every tag)
        matches; while running, the group member restarts with the new subscription."""
        self._add(topic, filter_expression)
        self._restart_if_running()

    def unsubscribe(self, topic: str) -> None:
        self._subscription.pop(self._configuration.named(topic), None)
        self._restart_if_running()

    def startup(self) -> None:
        """Join the group and start delivering; ``IllegalStateException`` when running or
        left without a subscription, the 5.x exception for Kafka's failure otherwise."""
        with self._lock:
            if self._loop is not None:
                raise IllegalStateException(f"{self} is already running")
            if not self._subscription:
                raise IllegalStateException(f"{self} has no subscription; call subscribe()")
            self._loop = self._start_loop()
        log.info(
            "push consumer started",
            extra={"group": self._group, "topics": sorted(self._subscription), "fifo": self._fifo},
        )

    def shutdown(self) -> None:
        """Leave the group once the callbacks in flight end; a consumer not running logs a
        warning and returns, as in 5.x."""
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is None:
            log.warning("%s is not running, can't shutdown", self)
            return
        loop.stop()

    @property
    def fifo(self) -> bool:
        return self._fifo

    @property
    def is_running(self) -> bool:
        return self._loop is not None

    @property
    def client_id(self) -> str:
        return self._client_id

    @property
    def consumer_group(self) -> str:
        return self._given_group

    def __str__(self) -> str:
        return f"PUSH_CONSUMER:{self._group}, client_id:{self._client_id}"

    # -- the core ----------------------------------------------------------------------------------

    def _add(self, topic: str, expression: FilterExpression | None) -> None:
        topic = self._configuration.named(topic)
        expression = expression if expression is not None else FilterExpression()
        try:
            kafka_topic = naming.kafka_topic(topic)
        except InvalidNameError as exc:
            raise IllegalArgumentException(f"cannot subscribe to {topic!r}: {exc}") from exc
        # a malformed expression is refused here, at subscribe (or when built with it)
        chosen = expression.message_filter(topic)
        self._subscription[topic] = Subscription(topic, kafka_topic, self._deliver, chosen)

    def _restart_if_running(self) -> None:
        with self._lock:
            loop = self._loop
            if loop is None:
                return
            loop.stop()
            self._loop = self._start_loop() if self._subscription else None

    def _start_loop(self) -> ConsumeLoop:
        try:
            naming.validate_group(self._group)
        except InvalidNameError as exc:
            raise IllegalArgumentException(f"bad consumer group {self._group!r}: {exc}") from exc
        subscriptions = {sub.kafka_topic: sub for sub in self._subscription.values()}
        try:
            bands = self._with_bands(subscriptions)
            config = ConsumerConfig(
                kafka_settings(self._configuration, tls=self._tls),
                self._group,
                orderly=self._fifo,
                instance_name=self._client_id,
                thread_count=self._threads,
                max_reconsume_times=self._max_attempts - 1,
                delay_levels=delay_levels_from_env(),
            )
            loop = ConsumeLoop(config, subscriptions, self.stats, bands=bands)
            loop.start()
        except (AdapterError, KafkaException) as exc:
            raise translate(exc, f"start push consumer {self._group}") from exc
        return loop

    def _with_bands(self, subscriptions: dict[str, Subscription]) -> dict[str, tuple[str, int]]:
        """Add the bands of the subscribed topics made for priorities to ``subscriptions``;
        each band's Kafka topic -> (its topic's Kafka name, its band)."""
        conf = kafka_settings(self._configuration, tls=self._tls).librdkafka({})
        found = PriorityBands(clients.admin(conf).list_topics, timeout_s=10)
        bands: dict[str, tuple[str, int]] = {}
        for kafka_topic, sub in list(subscriptions.items()):
            above_0 = found.of(kafka_topic)
            for band, band_topic in above_0.items():
                subscriptions[band_topic] = replace(sub, kafka_topic=band_topic)
                bands[band_topic] = (kafka_topic, band)
            if above_0:
                bands[kafka_topic] = (kafka_topic, 0)
        return bands

    def _deliver(self, received: ReceivedMessage) -> ConsumeStatus:
        message = Message.from_received(received, delivery_attempt=received.reconsume_times + 1)
        result: Any = self._listener.consume(message)
        return as_status(result)
