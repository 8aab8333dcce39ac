"""``SimpleConsumer``: the 5.x pull consumer (receive, ack, invisible duration) on a share group.

Reproduces ``rocketmq.v5.consumer.SimpleConsumer(client_configuration, consumer_group,
subscription=None, await_duration=20, tls_enable=False)`` of rocketmq-python-client 5.1:
``startup()``, ``subscribe(topic, filter_expression=None)``, ``unsubscribe(topic)``,
``receive(max_message_num, invisible_duration) -> list[Message]``, ``ack(message)``,
``change_invisible_duration(message, invisible_duration)``, their ``_async`` variants
(``concurrent.futures.Future``), ``shutdown()``; the same refusals (``IllegalStateException``
when not running, ``IllegalArgumentException`` for a bad group or count). Durations are seconds.

On Kafka the group is a share group (KIP-932) of the same name, read committed-only, starting
at the earliest retained message (:mod:`adapter.v5.share_group`). ``receive`` long-polls up to
``await_duration`` and returns at most ``max_message_num`` messages, each with
``delivery_attempt`` (Kafka's delivery count), ``message_id``, ``tag``, ``keys``,
``properties``, ``body``, ``topic`` and a ``receipt_handle``. A message not acked within its
invisible duration is released by this client and comes back with ``delivery_attempt`` + 1;
one delivered past the group's max attempts goes to ``%DLQ%<group>`` (the 2.0 consumer's
dead-letter topic and send-back) instead. Tag and SQL92 filters run here
(:mod:`.filter_expression`); ``filtered`` counts the messages they skipped.

Known gaps (docs/v5.md): an invisible duration is at most the group's
lock duration less 3 s, and ``change_invisible_duration`` cannot go past the lock Kafka took
when it handed the message over (both refused with ``BadRequestException``); a message held
by a process that dies comes back as soon as Kafka sees its connection close (or its lock or
session ends), which may be before its invisible duration; max attempts default to what the
broker allows (8 on Kafka's defaults, not 17); Kafka acquires whole record batches, so a
slow receiver's records may go back unseen, and one Kafka fetched as often as the group's
delivery count limit allows goes to the dead-letter topic however few times it was shown
(the reason says so); ``shutdown()`` waits for held messages to be acked or come
back; a topic made for priorities is received with the bands it had when subscribed, in no
priority order (the share group fetches every band at once); the receipt handle does not
change on ``change_invisible_duration``; FIFO order is not kept (a FIFO group's consumer is
:class:`~adapter.v5.fifo_consumer.FifoSimpleConsumer`); a Kafka consumer group's name (a 2.0
``PushConsumer``'s) cannot be a ``SimpleConsumer``'s group.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from confluent_kafka import KafkaError, KafkaException

from adapter import naming
from adapter.clock import SYSTEM_CLOCK, Clock
from adapter.config import KafkaSettings
from adapter.consumer.config import ConsumerConfig
from adapter.consumer.send_back import SendBack
from adapter.exceptions import AdapterError, InvalidNameError
from adapter.kafka import clients
from adapter.message_filter import MessageFilter
from adapter.v5.client_configuration import ClientConfiguration, kafka_settings
from adapter.v5.client_id import new_client_id
from adapter.v5.exception import (
    IllegalArgumentException,
    IllegalStateException,
    NotFoundException,
    translate,
)
from adapter.v5.filter_expression import FilterExpression
from adapter.v5.message import Message
from adapter.v5.share_group import (
    ROCKETMQ_MAX_ATTEMPTS,
    broker_limits,
    choose_attempts,
    configure_group,
    group_in_the_way,
)
from adapter.v5.share_pool import SharePool

__all__ = ["SimpleConsumer"]

log = logging.getLogger(__name__)

_GROUP_PATTERN = "^[%a-zA-Z0-9_-]+$"
_NEW_TOPIC_GRACE_S = 3.0
R = TypeVar("R")


class Engine(Protocol):
    """What a consumer receives through: the share pool, or a FIFO group's reader
    (:class:`~adapter.v5.fifo_reader.FifoReader`)."""

    @property
    def filtered(self) -> int: ...
    @property
    def longest_s(self) -> float: ...
    def check_duration(self, invisible_s: float) -> float: ...
    def receive(self, max_count: int, invisible_s: float, await_s: float) -> list[Message]: ...
    def ack(self, message: Message) -> None: ...
    def change(self, message: Message, invisible_s: float) -> None: ...
    def forward_to_dead_letters(self, message: Message, why: str) -> None: ...
    def close(self, *, wait_for_held: bool = True) -> None: ...


class SimpleConsumer:
    """Drop-in for ``rocketmq.SimpleConsumer`` (5.x); endpoints are Kafka bootstrap servers.

    Adapter extensions (keyword-only): ``lock_duration`` (seconds; the share group's record
    lock, the ceiling of invisible durations; default the broker's maximum), ``max_attempts``
    (deliveries before the dead-letter topic; default 17 or what the broker allows),
    ``max_consumers`` (Kafka share consumers in the pool, one per batch held at a time).
    """

    def __init__(
        self,
        client_configuration: ClientConfiguration,
        consumer_group: str,
        subscription: dict[str, FilterExpression] | None = None,
        await_duration: float = 20,
        tls_enable: bool = False,
        *,
        lock_duration: float | None = None,
        max_attempts: int | None = None,
        max_consumers: int = 8,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if client_configuration is None:
            raise IllegalArgumentException("clientConfiguration should not be null.")
        if consumer_group is None or not str(consumer_group).strip():
            raise IllegalArgumentException("consumerGroup should not be null")
        try:
            naming.validate_group(consumer_group)
        except InvalidNameError:
            raise IllegalArgumentException(
                f"consumerGroup does not match the regex [regex={_GROUP_PATTERN}]"
            ) from None
        if "|" in consumer_group:
            raise IllegalArgumentException(
                f"consumerGroup does not match the regex [regex={_GROUP_PATTERN}]"
            )
        if await_duration is None:
            raise IllegalArgumentException("awaitDuration should not be null")
        if max_attempts is not None and max_attempts < 1:
            raise IllegalArgumentException(f"max_attempts must be 1 or more, got {max_attempts}")
        self._configuration = client_configuration
        self._given_group = consumer_group
        self._group = client_configuration.named(consumer_group)
        self._await_duration = await_duration
        self._tls = tls_enable
        self._lock_duration = lock_duration
        self._max_attempts_asked = max_attempts
        self._max_consumers = max(1, max_consumers)
        self._clock = clock
        self._client_id = new_client_id()
        self._subscriptions: dict[str, tuple[FilterExpression, MessageFilter]] = {}
        for topic, expression in (subscription or {}).items():
            named = client_configuration.named(topic)
            self._subscriptions[named] = self._subscription(named, expression)
        self._lock = threading.Lock()
        self._pool: Engine | None = None
        self._send_back: SendBack | None = None
        self._callbacks: ThreadPoolExecutor | None = None
        self._kafka: KafkaSettings | None = None
        self._max_attempts = ROCKETMQ_MAX_ATTEMPTS
        self._had_shutdown = False
        self._bands: dict[str, list[str]] = {}

    # -- lifecycle ----------------------------------------------------------------------------

    def startup(self) -> None:
        """Configure the share group and start; ``IllegalStateException`` naming the cause
        when Kafka cannot be reached or refuses the group's settings."""
        if self._had_shutdown:
            raise IllegalStateException(f"{self} had shutdown, can't startup again.")
        if self._pool is not None:
            return
        kafka = kafka_settings(self._configuration, tls=self._tls)
        try:
            clients.reach(kafka.librdkafka({}), max(self._timeout_s(), 5.0))
            self._pool = self._start(kafka, self._timeout_s())
        except (AdapterError, KafkaException) as exc:
            raise IllegalStateException(f"{self} could not start: {exc}") from exc

    def _start(self, kafka: KafkaSettings, timeout_s: float) -> Engine:
        """The share group configured (its limits read from the broker), and its pool."""
        admin = clients.admin(kafka.librdkafka({}), announce=True)
        limits = broker_limits(admin, timeout_s)
        lock_ms = self._choose_lock_ms(limits.min_lock_ms, limits.max_lock_ms)
        self._max_attempts, count_limit = self._choose_attempts(limits.max_delivery_count)
        for topic in self._subscriptions:
            self._require_topic(topic, kafka)
        other = group_in_the_way(admin, self._group, max(timeout_s, 10.0))
        if other is not None:
            raise IllegalStateException(
                f"{self} could not start: {self._group!r} is the name of a Kafka consumer "
                f"group ({other} protocol: a 2.0 PushConsumer's?), and a SimpleConsumer's "
                "share group cannot take it; give the SimpleConsumer another group"
            )
        configure_group(
            admin,
            self._group,
            lock_ms=lock_ms,
            delivery_count_limit=count_limit,
            timeout_s=max(timeout_s, 10.0),
        )
        pool = SharePool(
            kafka=kafka, group=self._group, client_id=self._client_id, lock_ms=lock_ms,
            max_attempts=self._max_attempts, delivery_limit=count_limit,
            max_consumers=self._max_consumers,
            send_back=self._begin(kafka, timeout_s), filters=self._filters, timeout_s=timeout_s,
            clock=self._clock,
        )  # fmt: skip
        log.info(
            "%s started (Kafka at %s, lock %d ms, max attempts %d)",
            self, kafka.bootstrap_servers, lock_ms, self._max_attempts,
            extra={"group": self._group},
        )  # fmt: skip
        return pool

    def _begin(self, kafka: KafkaSettings, timeout_s: float) -> SendBack:
        """Keep ``kafka``; make the dead-letter send-back and the ``_async`` calls' threads."""
        self._kafka = kafka
        self._send_back = SendBack(
            ConsumerConfig(
                kafka,
                self._group,
                max_reconsume_times=self._max_attempts - 1,
                send_back_timeout_ms=int(timeout_s * 1000),
            )
        )
        self._callbacks = ThreadPoolExecutor(32, thread_name_prefix="v5-simple-consumer")
        return self._send_back

    def shutdown(self, *, wait_for_held: bool = True) -> None:
        """Stop: wait until every received message is acked or back in the group (at most
        the lock duration; closing earlier would let Kafka redeliver them early), then leave
        the group. ``wait_for_held=False`` (adapter extension, for the proxy, whose clients
        can no longer ack) gives the held messages back at once."""
        pool = self._pool
        if pool is None or self._had_shutdown:
            log.warning("%s is not running, can't shutdown", self)
            return
        self._had_shutdown = True  # no more receives; acks and changes go on while it waits
        pool.close(wait_for_held=wait_for_held)
        if self._callbacks is not None:
            self._callbacks.shutdown(wait=True)
        if self._send_back is not None:
            self._send_back.close()
        self._pool = None
        log.info("%s shut down", self)

    # -- subscriptions ------------------------------------------------------------------------

    def subscribe(self, topic: str, filter_expression: FilterExpression | None = None) -> None:
        self._running("unable to add subscription because simple consumer is not running")
        topic = self._configuration.named(topic)
        subscription = self._subscription(topic, filter_expression or FilterExpression())
        if topic not in self._subscriptions:
            self._require_topic(topic, self._kafka)
        with self._lock:
            self._subscriptions[topic] = subscription

    def unsubscribe(self, topic: str) -> None:
        self._running("unable to remove subscription because simple consumer is not running")
        with self._lock:
            self._subscriptions.pop(self._configuration.named(topic), None)

    # -- receive, ack, change -----------------------------------------------------------------

    def receive(self, max_message_num: int, invisible_duration: float) -> list[Message]:
        """Up to ``max_message_num`` messages, each invisible to the group for
        ``invisible_duration`` seconds; an empty list when none came within
        ``await_duration``."""
        pool = self._running("unable to receive messages because simple consumer is not running")
        if not self._subscriptions:
            raise IllegalArgumentException("There is no topic to receive message")
        if max_message_num <= 0:
            raise IllegalArgumentException("max_message_num must be greater than 0")
        invisible = pool.check_duration(invisible_duration)
        return pool.receive(max_message_num, invisible, float(self._await_duration))

    def ack(self, message: Message) -> None:
        """Consume ``message`` for good; ``BadRequestException`` when it is no longer held
        (acked already, or its invisible duration ended and it went back to the group)."""
        self._open("unable to ack message because simple consumer is not running").ack(message)

    def change_invisible_duration(self, message: Message, invisible_duration: float) -> None:
        """Keep ``message`` invisible for ``invisible_duration`` seconds from now (``0``: back
        to the group at once); refused when Kafka's lock on it ends sooner."""
        pool = self._open(
            "unable to change invisible duration because simple consumer is not running"
        )
        pool.change(message, invisible_duration)

    def forward_to_dead_letter_queue(self, message: Message, reason: str) -> None:
        """Move a received ``message`` to ``%DLQ%<group>`` now, with ``reason`` (adapter
        extension: the proxy's ``ForwardMessageToDeadLetterQueue``, which a FIFO push consumer
        calls after its own retries); refused as :meth:`ack` for a handle no longer held."""
        pool = self._open("unable to forward message because simple consumer is not running")
        pool.forward_to_dead_letters(message, reason)

    def receive_async(
        self, max_message_num: int, invisible_duration: float
    ) -> Future[list[Message]]:
        return self._submit(self.receive, max_message_num, invisible_duration)

    def ack_async(self, message: Message) -> Future[None]:
        return self._submit(self.ack, message)

    def change_invisible_duration_async(
        self, message: Message, invisible_duration: float
    ) -> Future[None]:
        return self._submit(self.change_invisible_duration, message, invisible_duration)

    # -- properties -----------------------------------------------------------------------------

    @property
    def consumer_group(self) -> str:
        return self._given_group

    @property
    def await_duration(self) -> float:
        return self._await_duration

    @await_duration.setter
    def await_duration(self, await_duration: float) -> None:
        self._await_duration = await_duration

    @property
    def is_running(self) -> bool:
        return self._pool is not None and not self._had_shutdown

    @property
    def client_id(self) -> str:
        return self._client_id

    @property
    def client_configuration(self) -> ClientConfiguration:
        return self._configuration

    @property
    def filtered(self) -> int:
        """Messages skipped by the filters, consumed unseen (adapter extension)."""
        return self._pool.filtered if self._pool is not None else 0

    @property
    def longest_invisible_duration(self) -> float:
        """The longest invisible duration a receive may ask, in seconds (adapter extension;
        for a share group, its record lock less a margin)."""
        return self._open("simple consumer is not running").longest_s

    @property
    def max_attempts(self) -> int:
        """Deliveries before a message goes to ``%DLQ%<group>`` (adapter extension)."""
        return self._max_attempts

    def __str__(self) -> str:
        return f"SIMPLE_CONSUMER:{self._group}, client_id:{self._client_id}"

    # -- internals ------------------------------------------------------------------------------

    def _open(self, why: str) -> Engine:
        """The pool, also while ``shutdown()`` waits for received messages to be settled."""
        pool = self._pool
        if pool is None:
            raise IllegalStateException(why)
        return pool

    def _running(self, why: str) -> Engine:
        pool = self._pool
        if pool is None or self._had_shutdown:
            raise IllegalStateException(why)
        return pool

    def _filters(self) -> dict[str, MessageFilter]:
        with self._lock:
            own = {naming.kafka_topic(t): f for t, (_e, f) in self._subscriptions.items()}
            return own | {b: own[t] for t, bands in self._bands.items() if t in own for b in bands}

    def _timeout_s(self) -> float:
        return max(1.0, float(self._configuration.request_timeout))

    def _subscription(
        self, topic: str, expression: FilterExpression
    ) -> tuple[FilterExpression, MessageFilter]:
        try:
            naming.kafka_topic(topic)
        except InvalidNameError as exc:
            raise IllegalArgumentException(str(exc)) from exc
        return expression, expression.message_filter(topic)

    def _require_topic(self, topic: str, kafka: KafkaSettings | None) -> None:
        """``NotFoundException`` unless ``topic`` exists (5.x looks up its route); a topic
        whose metadata is not ready yet (just created) is asked again, up to the timeout."""
        if kafka is None:
            raise IllegalStateException("simple consumer is not running")
        # A lookup must not create the topic (a broker with auto.create.topics.enable would).
        admin = clients.admin(kafka.librdkafka({"allow.auto.create.topics": False}))
        kafka_topic = naming.kafka_topic(topic)
        started = self._clock.monotonic()
        deadline = started + self._timeout_s() + 5
        while True:
            try:
                found = admin.list_topics(kafka_topic, timeout=self._timeout_s() + 5)
            except KafkaException as exc:
                raise translate(exc, f"look up topic {topic}") from exc
            info = found.topics.get(kafka_topic)
            error = None if info is None else info.error
            if info is not None and error is None and info.partitions:
                every = admin.list_topics(timeout=self._timeout_s() + 5).topics
                self._bands[kafka_topic] = list(naming.priority_bands(kafka_topic, every).values())
                return
            # A topic created a moment ago may be unknown to this broker for a little while.
            missing = error is None or error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
            now = self._clock.monotonic()
            if (missing and now > started + _NEW_TOPIC_GRACE_S) or now > deadline:
                why = "" if missing else f" ({error.str() if error else 'no partitions'})"
                raise NotFoundException(f"topic {topic!r} does not exist{why}", 40402)
            time.sleep(0.2)

    def _choose_lock_ms(self, least: int, most: int) -> int:
        if self._lock_duration is None:
            return most
        asked = int(self._lock_duration * 1000)
        if not least <= asked <= most:
            raise IllegalArgumentException(
                f"lock_duration {self._lock_duration} s is outside what the broker allows "
                f"({least / 1000:g} to {most / 1000:g} s: group.share.min/max.record.lock."
                "duration.ms)"
            )
        return asked

    def _choose_attempts(self, broker_max_count: int) -> tuple[int, int]:
        try:
            return choose_attempts(self._group, broker_max_count, self._max_attempts_asked)
        except ValueError as exc:
            raise IllegalArgumentException(str(exc)) from None

    def _submit(self, call: Callable[..., R], *args: Any) -> Future[R]:
        callbacks = self._callbacks
        try:
            if callbacks is None:
                raise RuntimeError("no executor")
            return callbacks.submit(call, *args)
        except RuntimeError:
            raise IllegalStateException("simple consumer is not running") from None
