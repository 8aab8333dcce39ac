"""``TransactionMQProducer``: RocketMQ's transactional send and check-back answers on Kafka.

Reproduces ``rocketmq.client.TransactionMQProducer`` of rocketmq-client-python 2.0 and the
client half of RocketMQ's transactional messages (reference sections 1.2, 1.7 and 6.1):

- ``send_message_in_transaction(msg, local_execute, user_args)`` writes the half message
  (``HalfMessage``, ``UNIQ_KEY`` = transaction id, ``TRAN_MSG``, ``PGROUP``) to
  ``RMQ_SYS_TRANS_HALF_TOPIC`` and waits for Kafka's acknowledgement; if that fails the caller
  gets ``ProducerSendSyncFailed`` and ``local_execute`` is not run. Then it runs
  ``local_execute(msg, user_args)``; ``COMMIT`` or ``ROLLBACK`` is sent as an
  ``EndTransaction`` to partition p of ``RMQ_SYS_TRANS_END_TOPIC``, p being the half message's
  partition, without waiting for the acknowledgement (RocketMQ sends END_TRANSACTION oneway).
  ``UNKNOWN``, ``None``, any other value and an exception send nothing: the coordinator's
  check-back settles the transaction. The result is ``SendResult(OK, transaction id, half
  offset)``, as RocketMQ returns the half message's ``UNIQ_KEY`` and queue offset.
- Check-backs: every producer of a group reads the group's check topic (``%CHECK%<group>``)
  in one Kafka consumer group, so any live producer of the group answers, as the broker picks
  any channel of the group. ``checker_callback(msg)`` sees the half message with
  ``TRANSACTION_CHECK_TIMES``; its ``COMMIT`` or ``ROLLBACK`` is written to END
  (``from_check``) and acknowledged before the request's offset is committed; ``UNKNOWN`` (or
  an exception, ``None``, any other value) writes nothing and the coordinator asks again.
- ``send_sync``, ``send_oneway`` and ``send_orderly_with_sharding_key`` are inherited from
  :class:`~adapter.producer.Producer`, as the original class inherits them.

Beyond RocketMQ: a message with a delay level or a delivery-time property (``TIMER_*``,
``__STARTDELIVERTIME``) is refused before anything is sent; RocketMQ's Java client strips
``DELAY``, its C++ client (under the Python one) keeps it and the broker then drops the message
(section 1.12). A check answer is at least once; the coordinator drops duplicate decisions.

Known gaps: checks are answered by one thread per producer (the C++ client uses one too). The
real topic must exist (RocketMQ's client looks up its route); it is not created. The half
message goes to any HALF partition, not to the message's queue; the committed message goes to
any queue of its real topic. ``user_args`` of the constructor is kept but unused (the original
hands it to the C library, not to ``checker_callback``). FLUSH_DISK_TIMEOUT and the other
non-OK send statuses of RocketMQ do not exist on Kafka, so a send is acknowledged or fails.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from enum import IntEnum
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka import Message as KafkaMessage
from confluent_kafka import Producer as KafkaProducer
from confluent_kafka.admin import AdminClient

from adapter import codec, naming
from adapter import properties as prop
from adapter.config import _GROUP_CONSUMER, ProducerConfig
from adapter.exceptions import (
    AdapterError,
    CodecError,
    ProducerException,
    ProducerSendSyncFailed,
    ProducerStartFailed,
)
from adapter.message import Message, ReceivedMessage
from adapter.msgid import new_message_id
from adapter.producer import Producer, SendResult, SendStatus, _Delivery
from adapter.records import CheckRequest, EndTransaction, TransactionDecision
from adapter.topics import ensure_single_queue_topic
from adapter.transaction.envelope import checked_message, half_message, prepared_message

__all__ = ["TransactionStatus", "TransactionMQProducer"]

log = logging.getLogger(__name__)

_HALF = naming.kafka_topic(naming.TRANS_HALF_TOPIC)
_END = naming.kafka_topic(naming.TRANS_END_TOPIC)
_POLL_S = 0.2
_SHUTDOWN_WAIT_S = 10.0
_RETRY_ANSWER_S = 0.5
_LOOKUP_RETRY_S = 0.1

# Each sender waits for its half message's acknowledgement, so the linger is short. Alone with
# the broker, linger.ms 0 sent more (8 threads: 2,723 transactions/s against 1,486), but with a
# coordinator and a reader on the same 2 cores, 1 ms did (757/s against 567): fewer requests.
_PRODUCER_SETTINGS: dict[str, Any] = {
    "linger.ms": 1,
    # The real topic's metadata is read to see whether it exists: never create it doing so.
    "allow.auto.create.topics": False,
}


class TransactionStatus(IntEnum):
    """``rocketmq.client.TransactionStatus``: what a local transaction or a check returns."""

    COMMIT = 0
    ROLLBACK = 1
    UNKNOWN = 2


_DECISIONS = {
    TransactionStatus.COMMIT: TransactionDecision.COMMIT,
    TransactionStatus.ROLLBACK: TransactionDecision.ROLLBACK,
    TransactionStatus.UNKNOWN: TransactionDecision.UNKNOWN,
}

LocalExecute = Callable[[ReceivedMessage, Any], Any]
Checker = Callable[[ReceivedMessage], Any]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _decision(result: object, what: str, transaction_id: str) -> TransactionDecision:
    """A callback's result as a decision: a TransactionStatus or its int, else UNKNOWN."""
    if isinstance(result, int) and not isinstance(result, bool) and 0 <= result <= 2:
        return _DECISIONS[TransactionStatus(result)]
    log.warning(
        "%s for transaction %s returned %r, not a TransactionStatus; counted as UNKNOWN",
        what,
        transaction_id,
        result,
    )
    return TransactionDecision.UNKNOWN


class TransactionMQProducer(Producer):
    """Drop-in for ``rocketmq.client.TransactionMQProducer``; Kafka bootstrap servers stand
    for name servers."""

    # Applications call send_message_in_transaction from many threads, and END records are
    # sent without waiting: each half message waits for its own acknowledgement only.
    _wait_by_flush = False

    def __init__(
        self,
        group_id: str,
        checker_callback: Checker,
        user_args: Any = None,
        timeout: int | None = None,
        compress_level: int | None = None,
        max_message_size: int | None = None,
    ) -> None:
        super().__init__(
            group_id,
            orderly=False,
            timeout=timeout,
            compress_level=compress_level,
            max_message_size=max_message_size,
        )
        self._checker = checker_callback
        self._user_args = user_args
        self._consumer: Consumer | None = None
        self._thread: threading.Thread | None = None
        self._poller: threading.Thread | None = None
        self._stopping = threading.Event()
        self._reports_done = threading.Event()
        self.end_failures = 0
        """END records Kafka did not acknowledge (adapter extension; the check settles them)."""

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        if self._client is not None:
            return
        if not callable(self._checker):
            raise ProducerStartFailed(
                f"producer {self._group!r} needs a checker_callback, got {self._checker!r}"
            )
        consumer: Consumer | None = None
        try:
            config = self._build_config()
            settings = config.librdkafka()
            settings.update(_PRODUCER_SETTINGS)
            settings.update(config.kafka.extra)
            client = KafkaProducer(settings, logger=log)
            check_topic = naming.kafka_topic(naming.check_topic(config.group))
            admin = AdminClient(config.kafka.librdkafka({}), logger=log)
            ensure_single_queue_topic(admin, check_topic, config.send_timeout_ms / 1000)
            consumer = Consumer(_check_consumer_settings(config, check_topic), logger=log)
            consumer.subscribe([check_topic])
        except (AdapterError, KafkaException, TimeoutError) as exc:
            if consumer is not None:
                consumer.close()
            reason = str(exc) or "Kafka did not answer in time"
            message = f"producer {self._group!r} could not start: {reason}"
            raise ProducerStartFailed(message) from exc
        self._config, self._client, self._consumer = config, client, consumer
        self._stopping.clear()
        self._reports_done.clear()
        self._thread = threading.Thread(
            target=self._answer_checks,
            args=(consumer, client),
            name=f"checks-{config.group}",
            daemon=True,
        )
        self._thread.start()
        self._poller = threading.Thread(
            target=self._serve_reports, args=(client,), name=f"reports-{config.group}", daemon=True
        )
        self._poller.start()

    def _serve_reports(self, client: KafkaProducer) -> None:
        """Serve delivery reports, which wake the senders waiting for their half message."""
        while not self._reports_done.is_set():
            client.poll(0.1)

    def shutdown(self) -> None:
        """Stop answering checks (waiting up to 10 s for a running ``checker_callback``),
        close the check consumer, then deliver what is still queued (END records)."""
        self._stopping.set()
        thread, self._thread = self._thread, None
        consumer, self._consumer = self._consumer, None
        poller, self._poller = self._poller, None
        if thread is not None:
            thread.join(_SHUTDOWN_WAIT_S)
        self._reports_done.set()
        if poller is not None:
            poller.join(_SHUTDOWN_WAIT_S)
        if consumer is not None:
            if thread is not None and thread.is_alive():
                log.error(
                    "producer %s: checker_callback still running after %.0f s; "
                    "its check consumer is left to the process exit",
                    self._group,
                    _SHUTDOWN_WAIT_S,
                )
            else:
                consumer.close()
        super().shutdown()

    # -- sending ----------------------------------------------------------------------------

    def send_message_in_transaction(
        self, message: Message, local_execute: LocalExecute, user_args: Any = None
    ) -> SendResult:
        """Half message, local transaction, decision; see the module's documentation."""
        error = ProducerSendSyncFailed
        client = self._require_client(error)
        topic, _ = self._checked(message, error)
        transaction_id = new_message_id()
        try:
            half = half_message(
                message, group=self._group, transaction_id=transaction_id, born_ms=_now_ms()
            )
            self._require_topics(client, topic)
            value = codec.encode(half)
        except (AdapterError, KafkaException) as exc:
            raise error(str(exc)) from exc

        delivery = _Delivery()
        self._produce_and_wait(
            client,
            _HALF,
            value,
            {
                "headers": [(prop.UNIQ_KEY, transaction_id.encode())],
                "on_delivery": delivery,
            },
            error,
            f"half message {transaction_id} for {message.topic}",
        )
        partition, offset = delivery.partition, delivery.offset

        prepared = prepared_message(half, half_partition=partition, half_offset=offset)
        try:
            result = local_execute(prepared, user_args)
        except Exception:
            log.exception(
                "local transaction %s raised; its state is UNKNOWN until a check settles it",
                transaction_id,
            )
            decision = TransactionDecision.UNKNOWN
        else:
            decision = _decision(result, "local_execute", transaction_id)
        if decision is not TransactionDecision.UNKNOWN:
            end = EndTransaction(
                transaction_id=transaction_id,
                producer_group=self._group,
                half_partition=partition,
                half_offset=offset,
                decision=decision,
                from_check=False,
                check_times=0,
                remark=None,
                timestamp=_now_ms(),
            )
            self._send_end(client, end)
        return SendResult(SendStatus.OK, transaction_id, offset)

    # -- internals --------------------------------------------------------------------------

    def _require_topics(self, client: KafkaProducer, topic: str) -> None:
        """The real topic exists, and so do HALF and END with the same partition count.

        A topic created a moment ago may not be in every broker's metadata yet: an unknown
        topic is looked up again until the send timeout has passed."""
        deadline = time.monotonic() + self._send_timeout_s()
        while True:
            try:
                self._queue_count(client, topic)
                break
            except AdapterError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(_LOOKUP_RETRY_S)
        try:
            half, end = self._queue_count(client, _HALF), self._queue_count(client, _END)
        except AdapterError as exc:
            raise AdapterError(
                f"{exc}; create the system topics with `rmq-adapter topics init`"
            ) from exc
        if half != end:
            raise AdapterError(
                f"{naming.TRANS_HALF_TOPIC} has {half} partitions and {naming.TRANS_END_TOPIC} "
                f"{end}; they must match (see `rmq-adapter topics init`)"
            )

    def _send_end(self, client: KafkaProducer, end: EndTransaction) -> None:
        """Hand an END record to the client, oneway: a lost one is settled by a check."""
        value = codec.encode(end)
        deadline = time.monotonic() + self._send_timeout_s()
        while True:
            try:
                client.produce(
                    _END,
                    value,
                    partition=end.half_partition,
                    on_delivery=self._on_end_delivery,
                )
                break
            except BufferError:
                if time.monotonic() > deadline:
                    self.end_failures += 1
                    log.error(
                        "END %s of transaction %s dropped: the local send queue stayed full; "
                        "a check will settle it",
                        end.decision.value,
                        end.transaction_id,
                    )
                    return
                client.poll(0.05)
            except KafkaException as exc:
                self.end_failures += 1
                log.error(
                    "END %s of transaction %s not sent (%s); a check will settle it",
                    end.decision.value,
                    end.transaction_id,
                    exc,
                )
                return
        client.poll(0)

    def _on_end_delivery(self, err: KafkaError | None, msg: KafkaMessage) -> None:
        if err is not None:
            self.end_failures += 1
            key = msg.key()
            log.warning(
                "END of transaction %s not delivered (%s); a check will settle it",
                key.decode() if isinstance(key, bytes) else key,
                err.str(),
            )

    # -- check-backs ------------------------------------------------------------------------

    def _answer_checks(self, consumer: Consumer, client: KafkaProducer) -> None:
        """The check thread: one request at a time until shutdown()."""
        while not self._stopping.is_set():
            try:
                record = consumer.poll(_POLL_S)
                if record is None:
                    continue
                failure = record.error()
                if failure is not None:
                    log.warning("check topic of %s: %s", self._group, failure.str())
                    continue
                self._answer(consumer, client, record)
            except Exception:
                log.exception("producer %s: answering a check failed", self._group)
                self._stopping.wait(_RETRY_ANSWER_S)

    def _answer(self, consumer: Consumer, client: KafkaProducer, record: KafkaMessage) -> None:
        topic, partition, offset = (
            record.topic() or "",
            record.partition() or 0,
            record.offset() or 0,
        )
        try:
            request = codec.decode_as(CheckRequest, record.value() or b"", canonical=False)
            if request.half_partition < 0:
                raise CodecError(f"half partition {request.half_partition} is negative")
        except CodecError as exc:
            log.error(
                "skipping unreadable check request %s[%d]@%d: %s",
                naming.decode(topic),
                partition,
                offset,
                exc,
            )
            self._commit(consumer, topic, partition, offset + 1)
            return
        tid = request.transaction_id
        try:
            result = self._checker(checked_message(request))
        except Exception:
            log.exception(
                "checker_callback raised for transaction %s (check %d); answered UNKNOWN",
                tid,
                request.check_times,
            )
            decision = TransactionDecision.UNKNOWN
        else:
            decision = _decision(result, "checker_callback", tid)
        if decision is not TransactionDecision.UNKNOWN:
            end = EndTransaction(
                transaction_id=tid,
                producer_group=request.producer_group,
                half_partition=request.half_partition,
                half_offset=request.half_offset,
                decision=decision,
                from_check=True,
                check_times=request.check_times,
                remark=None,
                timestamp=_now_ms(),
            )
            kwargs = {
                "partition": request.half_partition,
                "on_delivery": _Delivery(),
            }
            try:
                self._produce_and_wait(
                    client, _END, codec.encode(end), kwargs, ProducerException, f"answer to {tid}"
                )
            except ProducerException as exc:
                # Not committed: read the request again and ask the callback again.
                log.warning("%s; the check will be answered again", exc)
                consumer.seek(TopicPartition(topic, partition, offset))
                self._stopping.wait(_RETRY_ANSWER_S)
                return
        self._commit(consumer, topic, partition, offset + 1)

    def _commit(self, consumer: Consumer, topic: str, partition: int, next_offset: int) -> None:
        try:
            consumer.commit(
                offsets=[TopicPartition(topic, partition, next_offset)], asynchronous=False
            )
        except KafkaException as exc:
            # At least once: the request comes back and is answered again (duplicates are
            # dropped by the coordinator).
            log.warning("producer %s: check offset not committed: %s", self._group, exc)


def _check_consumer_settings(config: ProducerConfig, check_topic: str) -> dict[str, Any]:
    """All producers of a group share one consumer group on the group's check topic."""
    return config.kafka.librdkafka(
        {
            "group.id": check_topic,
            "client.id": f"{config.group}@{config.instance_name}-checks",
            **_GROUP_CONSUMER,
            "session.timeout.ms": 6000,
        }
    )
