"""``Producer``: the 5.x producer on Kafka, built on the 2.0 client's send core.

Reproduces ``rocketmq.v5.producer.Producer(client_configuration, topics=None, checker=None,
tls_enable=False)`` of rocketmq-python-client 5.1: ``startup()``, ``shutdown()``,
``send(message, transaction=None) -> SendReceipt``, ``send_async(message) ->
concurrent.futures.Future[SendReceipt]``, ``begin_transaction() -> Transaction``,
``is_running``, ``client_id``; the same refusals (``IllegalStateException`` when not running,
``IllegalArgumentException`` for a bad message, before anything is sent).

- A normal send is the 2.0 ``send_sync``: the shared :class:`~adapter.producer.sender.Sender`
  builds the record (body, ``UNIQ_KEY`` = ``message_id``, ``TAGS``, ``KEYS``, properties) and
  waits for Kafka's acknowledgement (acks=all, idempotent) up to ``request_timeout``.
- ``message_group`` (FIFO) and ``lite_topic`` choose the queue as the 2.0
  ``send_orderly_with_sharding_key`` does (RocketMQ's hash of the key over the topic's
  queues) and key the record with it: one group's, or one lite topic's, messages are in one
  partition, in send order.
- ``send_async`` returns a ``Future`` that Kafka's delivery report completes on a callback
  thread of the producer, as 5.x does on its callback executor; ``shutdown()`` waits for
  outstanding sends up to the send timeout and fails the futures still open.
- Transactions go through :mod:`adapter.v5.transactional` (the 2.0 transactional producer of
  the topic) and :mod:`adapter.v5.transaction`.
- A timer message (``delivery_timestamp``) goes through :mod:`adapter.v5.timers`; its receipt
  carries a recall handle for ``recall_message`` / ``recall_message_async``.
- A ``priority`` message goes to its band of a topic made for priorities (:mod:`adapter.
  priorities`), or to the topic itself when it has no bands; its receipt names the topic.

Known gaps: topics are not checked for a message type (5.x brokers refuse, say, a FIFO message
on a NORMAL topic). Normal sends spread over the partitions with librdkafka's sticky
partitioner, not 5.x's round-robin. Retries are librdkafka's, bounded by the send timeout, not
5.x's three attempts with back-off. ``startup()`` looks up no routes for ``topics`` (5.x
fetches them and only logs a failure); with a checker it starts their transactional
producers, and fails if Kafka cannot be reached. A producer cannot be started again after
``shutdown()``, as in 5.x.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType
from typing import Any, NamedTuple, Self

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import Message as KafkaRecord

from adapter import naming
from adapter.clock import SYSTEM_CLOCK, Clock
from adapter.config import delay_levels_from_env, fast_commit_from_env
from adapter.exceptions import AdapterError, DeliveryError, ProducerException
from adapter.msgid import new_message_id
from adapter.producer.config import ProducerConfig
from adapter.producer.sender import Outgoing, Sender
from adapter.schedule.recall import BadRecallHandle
from adapter.transaction.producer import HalfSent, TransactionMQProducer
from adapter.v5 import timers
from adapter.v5.client_configuration import ClientConfiguration, kafka_settings
from adapter.v5.client_id import new_client_id
from adapter.v5.exception import (
    BadRequestException,
    ClientException,
    IllegalArgumentException,
    IllegalStateException,
    translate,
)
from adapter.v5.message import Message, MessageType
from adapter.v5.send_receipt import MessageQueue, SendReceipt
from adapter.v5.transaction import Transaction, TransactionChecker, TransactionResolution
from adapter.v5.transactional import TransactionalSenders
from adapter.wire.records import TransactionDecision

__all__ = ["Producer"]

log = logging.getLogger(__name__)

HALF_TOPIC = naming.TRANS_HALF_TOPIC


class _SendFailed(ProducerException):
    """How the shared send core reports a failure to this producer (translated at once)."""


class Producer:
    """Drop-in for ``rocketmq.Producer`` (5.x); endpoints are Kafka bootstrap servers."""

    DEFAULT_MAX_SEND_ATTEMPTS = 3
    DEFAULT_MAX_BODY_SIZE = 4 * 1024 * 1024

    def __init__(
        self,
        client_configuration: ClientConfiguration,
        topics: Iterable[str] | None = None,
        checker: TransactionChecker | None = None,
        tls_enable: bool = False,
        *,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        """``clock`` (an adapter extension) stamps births and timers; tests inject one."""
        if client_configuration is None:
            raise IllegalArgumentException("clientConfiguration should not be null.")
        if checker is not None and not callable(getattr(checker, "check", None)):
            raise IllegalArgumentException(
                f"checker must be a TransactionChecker (with check(message)), got {checker!r}"
            )
        self._configuration = client_configuration
        self._topics = [client_configuration.named(t) for t in _valid_topics(topics or ())]
        self._checker = checker
        self._tls = tls_enable
        self._clock = clock
        self._client_id = new_client_id()
        self._lock = threading.Lock()
        self._sender: Sender | None = None
        self._transactional: TransactionalSenders | None = None
        self._callbacks: ThreadPoolExecutor | None = None
        self._pending: set[Future[SendReceipt]] = set()
        self._halves: dict[str, tuple[TransactionMQProducer, HalfSent]] = {}
        """Half messages sent and not ended yet, by transaction id."""
        self._had_shutdown = False

    # -- lifecycle ----------------------------------------------------------------------------

    def startup(self) -> None:
        """Start sending; with a checker, also answer the check-backs of ``topics``."""
        with self._lock:
            if self._had_shutdown:
                raise IllegalStateException(f"{self} had shutdown, can't startup again.")
            if self._sender is not None:
                return
            kafka = kafka_settings(self._configuration, tls=self._tls)
            timeout_ms = max(1, int(self._configuration.request_timeout * 1000))
            try:
                config = ProducerConfig(
                    kafka,
                    "PRODUCER",
                    self._client_id,
                    send_timeout_ms=timeout_ms,
                    max_message_size=self.DEFAULT_MAX_BODY_SIZE,
                    delay_levels=delay_levels_from_env(),
                    fast_commit=fast_commit_from_env(),
                )
                sender = Sender(config, reports_served=True, clock=self._clock)
            except (AdapterError, KafkaException) as exc:
                raise IllegalStateException(f"{self} could not start: {exc}") from exc
            transactional = None
            if self._checker is not None:
                transactional = TransactionalSenders(
                    kafka,
                    self._checker,
                    instance_name=self._client_id,
                    timeout_ms=timeout_ms,
                    max_message_size=self.DEFAULT_MAX_BODY_SIZE,
                )
                try:
                    transactional.start(self._topics)
                except ClientException:
                    transactional.close()
                    sender.close()
                    raise
            self._callbacks = ThreadPoolExecutor(1, thread_name_prefix="v5-send-callback")
            self._sender, self._transactional = sender, transactional
        log.info("%s started (Kafka at %s)", self, kafka.bootstrap_servers)

    def shutdown(self) -> None:
        """Stop: transactional producers first (a running check finishes, decisions are
        delivered), then outstanding sends (up to the send timeout); futures still open
        then fail."""
        with self._lock:
            sender, self._sender = self._sender, None
            transactional, self._transactional = self._transactional, None
            callbacks, self._callbacks = self._callbacks, None
            if sender is None:
                log.warning("%s is not running, can't shutdown", self)
                return
            self._had_shutdown = True
        if transactional is not None:
            transactional.close()
        remaining = sender.close()
        if remaining:
            log.error("%s shut down with %d messages unacknowledged", self, remaining)
        if callbacks is not None:
            callbacks.shutdown(wait=True)
        with self._lock:
            left, self._pending = self._pending, set()
        for future in left:
            _complete(
                future, IllegalStateException("the producer shut down before Kafka acknowledged")
            )
        log.info("%s shut down", self)

    def __enter__(self) -> Self:
        self.startup()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.is_running:
            self.shutdown()

    # -- sending ------------------------------------------------------------------------------

    def send(self, message: Message, transaction: Transaction | None = None) -> SendReceipt:
        """Send ``message`` and wait for Kafka's acknowledgement; with ``transaction``, send
        it as the transaction's half message (invisible until ``commit()``)."""
        sender = self._running("producer is not running now.")
        if transaction is not None:
            return self._send_half(message, transaction)
        record, sent = self._record(sender, message, transactional=False)
        try:
            ack = sender.produce_and_ack(record, _SendFailed, sent.what)
        except _SendFailed as exc:
            raise translate(exc, f"send message {sent.what}") from exc
        return sent.receipt(ack.partition, ack.offset)

    def send_async(self, message: Message) -> Future[SendReceipt]:
        """Send ``message`` without waiting; the ``Future`` gives its ``SendReceipt`` or the
        5.x exception. A message that cannot be sent at all raises here, as in 5.x. The
        receipt describes the message as it was at this call: the message may be changed, or
        sent again, before the future completes."""
        sender = self._running("producer is not running now.")
        record, sent = self._record(sender, message, transactional=False)
        future: Future[SendReceipt] = Future()
        with self._lock:
            callbacks = self._callbacks
            if callbacks is None:
                raise IllegalStateException("producer is not running now.")
            self._pending.add(future)

        def delivered(error: KafkaError | None, kafka_record: KafkaRecord) -> None:
            outcome: SendReceipt | ClientException
            if error is None:
                outcome = sent.receipt(kafka_record.partition() or 0, kafka_record.offset() or 0)
            else:
                why = f"Kafka refused {sent.message_id}: {error.str()}"
                outcome = translate(DeliveryError(why, kafka_error=error), f"send {sent.what}")
            self._settle(callbacks, future, outcome)

        try:
            sender.produce_oneway(record, _SendFailed, on_delivery=delivered)
        except _SendFailed as exc:
            self._settle(callbacks, future, translate(exc, f"send message {sent.what}"))
        return future

    def recall_message(self, topic: str, recall_handle: str) -> str:
        """Recall a timer message before its deliver time, by the ``recall_handle`` of its
        ``SendReceipt``; its message id. ``IllegalArgumentException`` for a handle not valid for
        ``topic``; ``BadRequestException`` when the message was delivered already."""
        sender = self._running("unable to recall message because producer is not running")
        try:
            return timers.recall(sender, self._configuration.named(topic), recall_handle)
        except BadRecallHandle as exc:
            raise IllegalArgumentException(str(exc)) from exc
        except (AdapterError, KafkaException) as exc:
            why = sender.with_address(exc)
            raise BadRequestException(f"recall {recall_handle} of {topic}: {why}") from exc

    def recall_message_async(self, topic: str, recall_handle: str) -> Future[str]:
        """:meth:`recall_message` on the callback thread; the ``Future`` gives the message id."""
        self._running("unable to recall message because producer is not running")
        callbacks = self._callbacks
        if callbacks is None:
            raise IllegalStateException("unable to recall message because producer is not running")
        return callbacks.submit(self.recall_message, topic, recall_handle)

    def begin_transaction(self) -> Transaction:
        """A new transaction; ``send(message, transaction)`` then ``commit()``/``rollback()``."""
        self._running("unable to begin transaction because producer is not running")
        if self._checker is None:
            raise IllegalArgumentException("Transaction checker should not be null.")
        return Transaction(self)

    # -- properties -----------------------------------------------------------------------------

    @property
    def is_running(self) -> bool:
        return self._sender is not None

    @property
    def client_id(self) -> str:
        return self._client_id

    @property
    def topics(self) -> set[str]:
        return {naming.split_namespace(topic)[1] for topic in self._topics}

    @property
    def client_configuration(self) -> ClientConfiguration:
        return self._configuration

    def __str__(self) -> str:
        return f"PRODUCER client_id:{self._client_id}"

    # -- internals ----------------------------------------------------------------------------

    def _running(self, why: str) -> Sender:
        sender = self._sender
        if sender is None:
            raise IllegalStateException(why)
        return sender

    def _record(
        self, sender: Sender, message: Message, *, transactional: bool
    ) -> tuple[Outgoing, _Sent]:
        """``message`` checked, given its id and type, and built as the record to produce;
        with what its receipt will say, taken now."""
        if message is None:
            raise IllegalArgumentException("message should not be null.")
        kind = message.type_for_send(
            transactional=transactional, max_body_size=self.DEFAULT_MAX_BODY_SIZE
        )
        message.message_id = msg_id = new_message_id()
        message.message_type = int(kind)
        wire = message.to_wire(self._configuration.namespace)
        topic, deliver_at = wire.topic, message.delivery_timestamp
        group = message.message_group or message.lite_topic  # one queue, in send order
        try:
            if deliver_at:
                timer = timers.timer_record(sender, wire, msg_id, deliver_at)
                if timer is not None:
                    handle = timers.recall_handle(sender, topic, msg_id, deliver_at)
                    return timer, _Sent(msg_id, str(message.topic), handle)
            partition = None
            if group is not None:
                partition = sender.queue_for(wire, group, _SendFailed)
            record = sender.record(wire, msg_id, _SendFailed, partition=partition, key=group)
            if kind is MessageType.PRIORITY:
                record = record._replace(topic=sender.bands.route(record.topic, message.priority))
            return record, _Sent(msg_id, str(message.topic), None)
        except ValueError as exc:
            raise IllegalArgumentException(str(exc)) from exc
        except (_SendFailed, AdapterError, KafkaException) as exc:
            raise translate(exc, f"send message {msg_id} to {topic}") from exc

    def _send_half(self, message: Message, transaction: Transaction) -> SendReceipt:
        if message is None:
            raise IllegalArgumentException("message should not be null.")
        message.type_for_send(transactional=True, max_body_size=self.DEFAULT_MAX_BODY_SIZE)
        transactional = self._transactional
        if transactional is None:
            raise IllegalArgumentException("Transaction checker should not be null.")
        transaction.add_half_message(message)
        wire = message.to_wire(self._configuration.namespace)
        topic = wire.topic
        producer = transactional.for_topic(topic)
        transaction_id = new_message_id()
        message.message_id = transaction_id
        message.message_type = int(MessageType.TRANSACTION)
        try:
            sent = producer.send_half(wire, transaction_id)
        except ProducerException as exc:
            raise translate(exc, f"send half message {transaction_id} to {topic}") from exc
        receipt = SendReceipt(
            transaction_id, transaction_id, MessageQueue(HALF_TOPIC, sent.partition), sent.offset
        )
        with self._lock:
            self._halves[transaction_id] = (producer, sent)
        transaction.add_send_receipt(receipt)
        return receipt

    def end_transaction(self, transaction_id: str, resolution: TransactionResolution) -> None:
        """Commit or roll back the half message this producer sent as ``transaction_id``
        (``Transaction.commit`` and ``rollback`` call it). A call that fails may be made
        again; once one succeeds, the transaction is forgotten."""
        self._running("unable to end transaction because producer is not running")
        if resolution not in (TransactionResolution.COMMIT, TransactionResolution.ROLLBACK):
            raise IllegalArgumentException(
                f"a transaction ends in COMMIT or ROLLBACK, not {resolution!r}"
            )
        with self._lock:
            half = self._halves.get(transaction_id)
        if half is None:
            raise IllegalStateException(
                f"transaction {transaction_id} was not sent by this producer, or has ended"
            )
        producer, sent = half
        decision = (
            TransactionDecision.COMMIT
            if resolution is TransactionResolution.COMMIT
            else TransactionDecision.ROLLBACK
        )
        try:
            producer.end_half(sent, decision)
        except ProducerException as exc:
            what = f"{resolution.name.lower()} transaction {sent.transaction_id}"
            raise translate(exc, what) from exc
        with self._lock:
            self._halves.pop(transaction_id, None)

    def _settle(
        self,
        callbacks: ThreadPoolExecutor,
        future: Future[SendReceipt],
        outcome: SendReceipt | ClientException,
    ) -> None:
        """Complete ``future`` on the callback thread (the caller may be librdkafka's)."""
        with self._lock:
            if future not in self._pending:
                return
            self._pending.discard(future)
        try:
            callbacks.submit(_complete, future, outcome)
        except RuntimeError:  # the executor is shut down: complete it here
            _complete(future, outcome)


def _complete(future: Future[Any], outcome: object) -> None:
    if not future.set_running_or_notify_cancel():
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


class _Sent(NamedTuple):
    """What a receipt says of a send, taken when it is sent (the application may change the
    message, or send it again, before Kafka acknowledges): a timer's receipt names its
    SCHEDULE partition and carries its recall handle."""

    message_id: str
    topic: str
    recall_handle: str | None

    @property
    def what(self) -> str:
        return f"{self.message_id} to {self.topic}"

    def receipt(self, partition: int, offset: int) -> SendReceipt:
        return SendReceipt(
            self.message_id, None, MessageQueue(self.topic, partition), offset, self.recall_handle
        )


def _valid_topics(topics: Iterable[str]) -> list[str]:
    """The topics a producer is built with, in order, without duplicates; an invalid one is
    left out with a warning, as the 5.x client does."""
    valid: list[str] = []
    for topic in topics:
        try:
            naming.sendable_kafka_topic(topic)
        except (AdapterError, TypeError):
            log.warning("topic %r is not a valid topic name and is ignored", topic)
            continue
        if topic not in valid:
            valid.append(topic)
    return valid
