"""``PushConsumer``: the 5.x push consumer on Kafka, a ``SimpleConsumer`` with a listener.

Reproduces ``rocketmq.v5.consumer.PushConsumer(client_configuration, consumer_group,
message_listener, subscription, max_cache_message_count=1024,
max_cache_message_size=64 MiB, consumption_thread_count=20, tls_enable=False)`` of
rocketmq-python-client 5.1.2 (a listener and a subscription are required:
``IllegalArgumentException``): ``subscribe(topic, filter_expression)``, ``unsubscribe``,
``startup()``, ``shutdown()``, ``is_running``, ``client_id``, ``consumer_group``, ``fifo``.

In RocketMQ 5 a push consumer pops messages exactly as a simple consumer does, so one group may
mix the two and they share one progress; upstream's examples give both the same group. Here
too: underneath is a :class:`~adapter.v5.simple_consumer.SimpleConsumer` of the group (a Kafka
share group of that name; with ``fifo=True`` a
:class:`~adapter.v5.fifo_consumer.FifoSimpleConsumer`, a FIFO group's), a receive loop and the
listener's threads. The loop receives up to 32 messages at a time, each invisible for 30 s
(at most half the group's lock), while fewer than ``max_cache_message_count`` are waiting or
running; ``consumption_thread_count`` threads run the listener, in the order received.

``SUCCESS`` acks the message. ``FAILURE`` (an exception, or any other answer) makes it
invisible for the back-off of its attempt, the delay levels (1 s, 5 s, 10 s, 30 s, 1 min, ...),
as RocketMQ's proxy tells a push consumer; it is then delivered again with
``delivery_attempt`` + 1. A failure at the group's max attempts moves the message to
``%DLQ%<group>``. Filters are tag or SQL92 expressions (:class:`~adapter.v5.FilterExpression`);
a message filtered out is consumed unseen and counted in ``stats.filtered``. A topic made for
priorities is received highest band first (:mod:`adapter.v5.share_pool`). FIFO (adapter
extension ``fifo=True``; RocketMQ reads it from the group's settings on the broker): the next
message of a ``message_group`` is received only once the one before is acked, so a failing
message is retried in place and holds back its own message group only.

Known gaps: the max attempts are a share group's (17, or what the broker allows: 8 on Kafka's
defaults; docs/v5.md); a back-off longer than the group's record lock allows is cut short (the
message comes back when the invisible duration it was received with ends); a listener that
runs past 30 s sees its message delivered again (RocketMQ renews it while the listener runs;
Kafka has no renewal of a share group's lock). ``max_cache_message_size`` is
accepted and not applied.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from adapter import naming
from adapter.clock import SYSTEM_CLOCK, Clock
from adapter.config import delay_levels_from_env
from adapter.delay import DelayLevels
from adapter.exceptions import InvalidNameError
from adapter.v5.client_configuration import ClientConfiguration
from adapter.v5.client_id import new_client_id
from adapter.v5.exception import ClientException, IllegalArgumentException, IllegalStateException
from adapter.v5.fifo_consumer import FifoSimpleConsumer
from adapter.v5.filter_expression import FilterExpression
from adapter.v5.message import Message
from adapter.v5.message_listener import MessageListener, listen
from adapter.v5.simple_consumer import SimpleConsumer

__all__ = ["PushConsumer", "PushStats", "retry_delay_s"]

log = logging.getLogger(__name__)

BATCH = 32
"""Messages one receive asks for: RocketMQ's ``receiveBatchSize`` for a push consumer."""
INVISIBLE_S = 30.0
"""How long a received message stays invisible while it waits and its listener runs, at most
half what the group allows: a record Kafka locked a while before it is received (fetched
ahead) must still have that long left of its lock."""
RECEIVE_WAIT_S = 2.0
"""How long one receive of the loop waits for messages; also how long ``shutdown`` may wait
for the loop to notice."""
_STOP_WAIT_S = 30.0


def retry_delay_s(attempt: int, levels: DelayLevels) -> float:
    """How long a message whose ``attempt``-th delivery failed stays invisible: the
    ``attempt``-th delay level (the last one beyond them), in seconds."""
    delays = levels.delays_ms
    return delays[min(max(attempt, 1), len(delays)) - 1] / 1000


@dataclass(frozen=True)
class PushStats:
    """What a push consumer has done (adapter extension, for tests and logs)."""

    consumed: int
    failed: int
    dead_lettered: int
    filtered: int


class PushConsumer:
    """Drop-in for ``rocketmq.v5.consumer.PushConsumer``.

    Adapter extensions (keyword-only): ``fifo`` (a FIFO consumer group), ``max_delivery_attempts``
    (deliveries before the dead-letter topic; default 17 or what the broker allows), ``clock``.
    """

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
        max_delivery_attempts: int | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if not message_listener:
            raise IllegalArgumentException("message_listener should not be null")
        if not subscription:
            raise IllegalArgumentException("subscription should not be null")
        if consumption_thread_count <= 0:
            raise IllegalArgumentException(
                f"consumption_thread_count must be positive, got {consumption_thread_count}"
            )
        if max_delivery_attempts is not None and max_delivery_attempts < 1:
            raise IllegalArgumentException(
                f"max_delivery_attempts must be 1 or more, got {max_delivery_attempts}"
            )
        if max_cache_message_count <= 0:
            raise IllegalArgumentException(
                f"max_cache_message_count must be positive, got {max_cache_message_count}"
            )
        self._configuration = client_configuration
        self._given_group = consumer_group
        self._subscription = dict(subscription)
        self._tls = tls_enable
        self._max_attempts = max_delivery_attempts
        self._clock = clock
        self._fifo = fifo
        for topic in subscription:
            self._check(topic)
        self._engine = self._new_engine()  # the group and filters checked here
        self._listener = message_listener
        self._threads = consumption_thread_count
        self._max_cached = max_cache_message_count
        self._levels = delay_levels_from_env()
        self._client_id = new_client_id()
        self._lock = threading.Lock()
        self._room = threading.Condition(self._lock)
        self._waiting: deque[Message] = deque()
        self._in_flight = 0
        self._stopping = threading.Event()
        self._loop: threading.Thread | None = None
        self._workers: ThreadPoolExecutor | None = None
        self._consumed = self._failed = self._dead = 0
        self._had_engine_started = False

    # -- what the application calls ------------------------------------------------------------

    def subscribe(self, topic: str, filter_expression: FilterExpression | None = None) -> None:
        """Consume ``topic``, keeping the messages ``filter_expression`` (default: every tag)
        matches; while running, from the next receive on."""
        self._check(topic)
        with self._lock:
            if self._engine.is_running:
                self._engine.subscribe(topic, filter_expression)
            else:
                chosen = {**self._subscription, topic: filter_expression or FilterExpression()}
                self._engine = self._new_engine(chosen)
            self._subscription[topic] = filter_expression or FilterExpression()

    def unsubscribe(self, topic: str) -> None:
        with self._lock:
            if self._engine.is_running:
                self._engine.unsubscribe(topic)
            self._subscription.pop(topic, None)

    def startup(self) -> None:
        """Start the group's consumer and deliver; ``IllegalStateException`` when running
        already, or naming the cause when Kafka cannot be reached or refuses the group."""
        with self._lock:
            if self._loop is not None:
                raise IllegalStateException(f"{self} is already running")
            if not self._subscription:
                raise IllegalStateException(f"{self} has no subscription; call subscribe()")
            if self._had_engine_started:
                self._engine = self._new_engine()  # a SimpleConsumer starts once
            self._had_engine_started = True
            self._engine.startup()
            self._stopping.clear()
            self._workers = ThreadPoolExecutor(self._threads, thread_name_prefix="v5-push")
            self._loop = threading.Thread(
                target=self._receive_loop, name=f"push-{self}", daemon=True
            )
            self._loop.start()
        log.info(
            "push consumer started",
            extra={"group": self.consumer_group, "fifo": self._fifo, "client": self._client_id},
        )

    def shutdown(self) -> None:
        """Stop receiving, give back the messages not yet given to the listener, wait for the
        listener calls in flight (their acks included), then leave the group. A consumer not
        running logs a warning and returns, as in 5.x."""
        with self._lock:
            loop, self._loop = self._loop, None
            workers, self._workers = self._workers, None
        if loop is None or workers is None:
            log.warning("%s is not running, can't shutdown", self)
            return
        self._stopping.set()
        with self._room:
            self._room.notify_all()
        loop.join(RECEIVE_WAIT_S + _STOP_WAIT_S)
        with self._lock:
            unstarted, self._waiting = list(self._waiting), deque()
        for message in unstarted:
            self._give_back(message)
        workers.shutdown(wait=True)
        self._engine.shutdown()

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
        return self._engine.consumer_group

    @property
    def stats(self) -> PushStats:
        """Counters of this consumer (adapter extension)."""
        with self._lock:
            return PushStats(self._consumed, self._failed, self._dead, self._engine.filtered)

    def __str__(self) -> str:
        return f"PUSH_CONSUMER:{self.consumer_group}, client_id:{self._client_id}"

    # -- the loop and the listener's threads ---------------------------------------------------

    def _check(self, topic: str) -> None:
        try:
            naming.kafka_topic(self._configuration.named(topic))
        except InvalidNameError as exc:
            raise IllegalArgumentException(f"cannot subscribe to {topic!r}: {exc}") from exc

    def _new_engine(
        self, subscription: dict[str, FilterExpression] | None = None
    ) -> SimpleConsumer:
        kind = FifoSimpleConsumer if self._fifo else SimpleConsumer
        return kind(
            self._configuration, self._given_group, dict(subscription or self._subscription),
            RECEIVE_WAIT_S, self._tls, max_attempts=self._max_attempts, clock=self._clock,
        )  # fmt: skip

    def _receive_loop(self) -> None:
        """Receive while there is room in the cache; hand each message to the workers."""
        invisible = min(INVISIBLE_S, self._engine.longest_invisible_duration / 2)
        while not self._stopping.is_set():
            with self._room:
                while self._in_flight >= self._max_cached and not self._stopping.is_set():
                    self._room.wait(1.0)
                room = min(BATCH, self._max_cached - self._in_flight)
            if self._stopping.is_set():
                return
            try:
                messages = self._engine.receive(room, invisible)
            except ClientException as exc:
                log.warning("%s: receive failed (%s); trying again in 1 s", self, exc)
                self._stopping.wait(1.0)
                continue
            except Exception:  # a bug of ours: logged, and the loop goes on
                log.exception("%s: receive failed; trying again in 1 s", self)
                self._stopping.wait(1.0)
                continue
            workers = self._workers
            with self._lock:
                self._in_flight += len(messages)
                self._waiting.extend(messages)
            for _ in messages:
                if workers is not None:
                    workers.submit(self._consume_next)

    def _consume_next(self) -> None:
        """Run the listener on the oldest waiting message, then settle it."""
        with self._lock:
            if not self._waiting:
                return  # given back by shutdown()
            message = self._waiting.popleft()
        try:
            self._settle(message, listen(self._listener, message, self))
        except Exception:  # a bug of ours; the message comes back when its duration ends
            log.exception("%s: settling %s failed", self, message.message_id)
        finally:
            with self._room:
                self._in_flight -= 1
                self._room.notify_all()

    def _settle(self, message: Message, consumed: bool) -> None:
        """Ack a consumed message; otherwise make it invisible for its back-off, or move it
        to the dead-letter topic after its last attempt."""
        attempt = message.delivery_attempt or 1
        try:
            if consumed:
                self._engine.ack(message)
                self._count(consumed=1)
            elif attempt >= self._engine.max_attempts:
                why = f"consumed {attempt} times without success"
                self._engine.forward_to_dead_letter_queue(message, why)
                self._count(failed=1, dead=1)
            else:
                self._retry_later(message, retry_delay_s(attempt, self._levels))
                self._count(failed=1)
        except ClientException as exc:
            # Its invisible duration ended first: the group has it again already.
            log.warning("%s: %s of %s failed: %s", self, "ack" if consumed else "retry",
                        message.message_id, exc)  # fmt: skip

    def _retry_later(self, message: Message, delay_s: float) -> None:
        longest = self._engine.longest_invisible_duration
        try:
            self._engine.change_invisible_duration(message, min(delay_s, longest))
        except ClientException as exc:
            # Kafka's lock on it ends sooner: it comes back when its invisible duration ends.
            log.debug("%s: back-off of %s cut short: %s", self, message.message_id, exc)

    def _give_back(self, message: Message) -> None:
        try:
            self._engine.change_invisible_duration(message, 0)
        except ClientException as exc:
            log.debug("%s: %s not given back: %s", self, message.message_id, exc)
        with self._room:
            self._in_flight -= 1

    def _count(self, *, consumed: int = 0, failed: int = 0, dead: int = 0) -> None:
        with self._lock:
            self._consumed += consumed
            self._failed += failed
            self._dead += dead
