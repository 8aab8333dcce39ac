"""``TransactionMQProducer``: RocketMQ's transactional send and check-back answers on Kafka.

Reproduces ``rocketmq.client.TransactionMQProducer`` of rocketmq-client-python 2.0 and the
client half of RocketMQ's transactional messages (``DefaultMQProducerImpl``'s
``sendMessageInTransaction`` and ``checkTransactionState``):

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
- ``send_half(message)`` and ``end_half(sent, decision)`` are the two steps on their own, for
  a client whose application decides later (``adapter.v5``'s ``Transaction``); a decision
  taken after the fast path's window goes straight to END and is acknowledged;
- check-backs are answered by :mod:`adapter.transaction.checks`;
- ``send_sync``, ``send_oneway`` and ``send_orderly_with_sharding_key`` work as on
  ``Producer``: both derive from :class:`~adapter.producer.producer.ProducerBase` (the
  original class inherits them too), which hands every send to the send core it holds
  (:class:`~adapter.producer.sender.Sender`).

Beyond RocketMQ: a message with a delay level or a delivery-time property (``TIMER_*``,
``__STARTDELIVERTIME``) is refused before anything is sent; RocketMQ's Java client strips
``DELAY``, its C++ client (under the Python one) keeps it and the broker then drops the message
(section 1.12).

A real topic that does not exist is asked for by name before the half message is written, so
that a broker which creates topics on use (RocketMQ's ``autoCreateTopicEnable``) creates it,
as for a plain send; elsewhere the send fails, before the local transaction runs, with one
line naming the topic and ``rmq-adapter topics create``.

Known gaps: the half message goes to any HALF partition, not to the message's queue; the
committed message goes to any queue of its real topic. ``user_args`` of the constructor is
kept but unused (the original hands it to the C library, not to ``checker_callback``).
FLUSH_DISK_TIMEOUT and the other non-OK send statuses of RocketMQ do not exist on Kafka, so a
send is acknowledged or fails.
"""

from __future__ import annotations

import functools
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import Message as KafkaRecord

from adapter import naming
from adapter.clock import SYSTEM_CLOCK, Clock
from adapter.config import KafkaSettings
from adapter.exceptions import (
    AdapterError,
    ProducerException,
    ProducerSendSyncFailed,
    ProducerStartFailed,
)
from adapter.kafka import clients
from adapter.message import Message, ReceivedMessage
from adapter.msgid import new_message_id
from adapter.producer.config import ProducerConfig
from adapter.producer.producer import ProducerBase
from adapter.producer.sender import Outgoing, Sender, SendResult, SendStatus
from adapter.transaction import half_record
from adapter.transaction.checks import Checker, CheckResponder
from adapter.transaction.direct_commit import DirectCommits, is_direct
from adapter.transaction.envelope import (
    DELIVERED_HEADER,
    TransactionStatus,
    committed_delivery,
    decide,
    end_transaction,
    prepared_message,
)
from adapter.transaction.fences import TopicFences
from adapter.transaction.group_commit import Decision, GroupCommitter, lane_settings
from adapter.transaction.half_record import END, HALF
from adapter.transaction.timing import FAST_COMMIT_WINDOW_MS
from adapter.wire import codec
from adapter.wire.records import EndTransaction, HalfMessage, TransactionDecision

__all__ = ["HalfSent", "TransactionStatus", "TransactionMQProducer"]

log = logging.getLogger(__name__)

# Each sender waits for its half message's acknowledgement, so the linger is short. Alone with
# the broker, linger.ms 0 sent more (8 threads: 2,723 transactions/s against 1,486), but with a
# coordinator and a reader on the same 2 cores, 1 ms did (757/s against 567): fewer requests.
_PRODUCER_SETTINGS: dict[str, Any] = {
    "linger.ms": 1,
    # A missing real topic is asked for by name, so that a broker with
    # auto.create.topics.enable creates it, as it does for a plain send.
    "allow.auto.create.topics": True,
}

LocalExecute = Callable[[ReceivedMessage, Any], Any]


@dataclass(frozen=True, slots=True)
class HalfSent:
    """A half message Kafka acknowledged at ``partition``@``offset`` of HALF, not yet decided."""

    half: HalfMessage
    partition: int
    offset: int

    @property
    def transaction_id(self) -> str:
        return self.half.transaction_id


class TransactionMQProducer(ProducerBase):
    """Drop-in for ``rocketmq.client.TransactionMQProducer``; Kafka bootstrap servers stand
    for name servers."""

    def __init__(
        self,
        group_id: str,
        checker_callback: Checker,
        user_args: Any = None,
        timeout: int | None = None,
        compress_level: int | None = None,
        max_message_size: int | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
        kafka: KafkaSettings | None = None,
    ) -> None:
        self._group = group_id
        self._kafka = kafka
        self._timeout_ms = timeout
        self._compress_level = compress_level
        self._max_message_size = max_message_size
        self._checker = checker_callback
        self._user_args = user_args
        self._clock = clock
        self._sender: Sender | None = None
        self._checks: CheckResponder | None = None
        self._committer: GroupCommitter | None = None
        self._direct: DirectCommits | None = None
        self._half_at: int | None = None
        self.end_failures = 0
        """END records Kafka did not take (adapter extension; the check-back settles them)."""

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Start sending, and answer check requests of the group.

        Raises ``ProducerStartFailed`` (naming the Kafka address when Kafka is the cause) when
        the settings are invalid or the group's check topic cannot be joined in time."""
        if self._sender is not None:
            return
        if not callable(self._checker):
            raise ProducerStartFailed(
                f"producer {self._group!r} needs a checker_callback, got {self._checker!r}"
            )
        config = self._producer_config()
        sender: Sender | None = None
        try:
            sender = Sender(
                config, settings=_PRODUCER_SETTINGS, reports_served=True, clock=self._clock
            )
            checks = CheckResponder(sender, self._checker, self._clock)
            checks.start()
        except (AdapterError, KafkaException) as exc:
            if sender is not None:
                sender.close()
            raise ProducerStartFailed(
                f"producer {self._group!r} could not start (Kafka at "
                f"{config.kafka.bootstrap_servers}): {exc}"
            ) from exc
        self._sender, self._checks = sender, checks
        if config.fast_commit:
            self._committer = self._group_committer(config, sender)
            admin = functools.partial(clients.admin, config.kafka.librdkafka({}))
            fences = TopicFences(admin, config.send_timeout_ms / 1000, self._clock)
            self._direct = DirectCommits(sender, fences, self._clock, self._end_lost)

    def shutdown(self) -> None:
        """Stop answering checks (waiting up to 10 s for a running ``checker_callback``),
        commit the decisions of the open group, then deliver what is still queued (END
        records)."""
        checks, self._checks = self._checks, None
        committer, self._committer = self._committer, None
        sender, self._sender = self._sender, None
        self._direct = None
        if checks is not None:
            checks.stop()
        if committer is not None:
            committer.close()
        if sender is not None:
            remaining = sender.close()
            if remaining:
                log.error(
                    "producer %s shut down with %d records undelivered", self._group, remaining
                )

    def flush(self, timeout: float | None = None) -> int:
        """Wait for the decisions of the open fast-path groups (committed, or their END
        records handed to the plain way), then for outstanding sends; returns how many are
        still undelivered."""
        sender, committer = self._sender, self._committer
        if sender is None:
            return 0
        timeout_s = sender.timeout_s if timeout is None else timeout
        deadline = SYSTEM_CLOCK.monotonic() + timeout_s
        pending = committer.flush(timeout_s) if committer is not None else 0
        return pending + super().flush(max(0.0, deadline - SYSTEM_CLOCK.monotonic()))

    @property
    def fast_path(self) -> GroupCommitter | None:
        """The group committer of the fast path, while started with it (its counters say how
        many decisions it committed, and how many went to the coordinator)."""
        return self._committer

    # -- transactional send -------------------------------------------------------------------

    def send_message_in_transaction(
        self, message: Message, local_execute: LocalExecute, user_args: Any = None
    ) -> SendResult:
        """Half message, local transaction, decision; see the module's documentation."""
        sender = self._started(ProducerSendSyncFailed)
        sent = self.send_half(message)
        tid = sent.transaction_id
        prepared = prepared_message(
            sent.half, half_partition=sent.partition, half_offset=sent.offset
        )
        decision = decide(local_execute, "local_execute", tid, prepared, user_args)
        if decision is not TransactionDecision.UNKNOWN:
            end = self._end_record(sent, decision)
            if not self._taken(sent, end):
                self._send_end(sender, end)
        return SendResult(SendStatus.OK, tid, sent.offset)

    def send_half(
        self,
        message: Message,
        transaction_id: str | None = None,
        *,
        copy_stamp: int | None = None,
        key: str | None = None,
    ) -> HalfSent:
        """The first step alone: write ``message``'s half message (transaction id
        ``transaction_id``, a new one if None) and wait for Kafka's acknowledgement;
        ``ProducerSendSyncFailed`` when it is refused or not acknowledged. For clients whose
        application decides later (the 5.x ``Transaction``); :meth:`end_half` decides it.

        ``copy_stamp`` and ``key`` (default: this producer's HALF partition) are for a caller
        that may send one message's half again from another process (the proxy, when a client
        retries through another one): the same stamp and key put the copy in the same HALF
        partition, where the coordinator takes it for the same message. The born time is
        always now: the check-back and the fast path's window count from it."""
        half, record = self.half_record(message, transaction_id, copy_stamp=copy_stamp, key=key)
        what = f"half message {half.transaction_id} for {message.topic}"
        ack = self._started(error := ProducerSendSyncFailed).produce_and_ack(record, error, what)
        return HalfSent(half, ack.partition, ack.offset)

    async def send_built_half(self, half: HalfMessage, record: Outgoing) -> HalfSent:
        """The half message and record of :meth:`half_record` sent from an asyncio task, which
        awaits the acknowledgement (building them waits on nothing once :meth:`ready_for`)."""
        what = f"half message {half.transaction_id} for {half.topic}"
        sender = self._started(ProducerSendSyncFailed)
        ack = await sender.produce_and_await(record, ProducerSendSyncFailed, what)
        return HalfSent(half, ack.partition, ack.offset)

    def ready_for(self, kafka_topic: str) -> bool:
        """Whether a half message to ``kafka_topic`` is built without asking Kafka anything:
        started, and the topic's and HALF's partitions (and the topic's fence) known lately."""
        sender, direct = self._sender, self._direct
        if sender is None or not all(sender.topics.cached(t) for t in (kafka_topic, HALF, END)):
            return False
        return direct is None or direct.knows(kafka_topic)

    def half_record(
        self,
        message: Message,
        transaction_id: str | None = None,
        *,
        copy_stamp: int | None = None,
        key: str | None = None,
    ) -> tuple[HalfMessage, Outgoing]:
        """``message``'s half message and the HALF record that carries it (see
        :meth:`send_half`); ``ProducerSendSyncFailed`` when it cannot be sent."""
        sender = self._started(ProducerSendSyncFailed)
        try:
            tid, now = transaction_id or new_message_id(), self._clock.now_ms()
            half = half_record.half_of(sender, message, self._group, tid, now, copy_stamp)
            if self._direct is not None:
                half = self._direct.prepare(half)
            partition = self._half_partition(sender)
            return half, half_record.record(sender, half, partition=partition, key=key)
        except (AdapterError, KafkaException) as exc:
            raise ProducerSendSyncFailed(str(exc)) from exc

    def end_half(self, sent: HalfSent, decision: TransactionDecision) -> None:
        """Decide a half message of :meth:`send_half`: ``COMMIT`` or ``ROLLBACK``. A direct
        one's COMMIT is appended (:mod:`adapter.transaction.direct_commit`); inside the fast
        path's window a decision goes to the group committer; later, or when neither can take
        it, its END record is sent and acknowledged: ``ProducerSendSyncFailed`` if Kafka does
        not take it (the check-back then settles the transaction)."""
        if decision is TransactionDecision.UNKNOWN:
            raise ValueError("only COMMIT or ROLLBACK ends a half message")
        sender = self._started(ProducerSendSyncFailed)
        end = self._end_record(sent, decision)
        if self._taken(sent, end):
            return
        record = Outgoing(END, codec.encode(end), [], end.half_partition, None)
        sender.produce_and_ack(record, ProducerSendSyncFailed, f"END of {end.transaction_id}")

    def end_without_waiting(self, sent: HalfSent, decision: TransactionDecision) -> bool:
        """:meth:`end_half` when it waits on nothing: a COMMIT of a direct half message whose
        topic's fence is known, appended in its window (for an event loop). False: nothing
        was done; call :meth:`end_half`."""
        direct = self._direct
        if (
            decision is not TransactionDecision.COMMIT
            or direct is None
            or self._sender is None
            or not is_direct(sent.half)
            or not direct.knows(naming.kafka_topic(sent.half.topic))
        ):
            return False
        return direct.commit(sent.half, self._end_record(sent, decision))

    def end_named(
        self,
        transaction_id: str,
        half_at: tuple[int, int],
        decision: TransactionDecision,
        *,
        check_times: int = 0,
    ) -> None:
        """Decide a half message of this group known only by its transaction id and where it
        is (``half_at``: HALF partition, offset): a decision that reaches another process than
        the one that sent the half message, or the answer to check number ``check_times``
        (0: the producer's own decision) given later than :mod:`adapter.transaction.checks`
        asks. Its END record is sent and acknowledged (``ProducerSendSyncFailed`` if not);
        the coordinator refuses it if it names another message. ``ValueError`` for UNKNOWN or
        a place that cannot hold a half message."""
        if decision is TransactionDecision.UNKNOWN:
            raise ValueError("only COMMIT or ROLLBACK ends a half message")
        sender = self._started(ProducerSendSyncFailed)
        partitions = sender.topics.count(END)
        if not 0 <= half_at[0] < partitions or half_at[1] < 0:
            raise ValueError(f"no half message at {half_at} ({partitions} HALF partitions)")
        end = EndTransaction(
            transaction_id=transaction_id,
            producer_group=self._group,
            half_partition=half_at[0],
            half_offset=half_at[1],
            decision=decision,
            from_check=check_times > 0,
            check_times=check_times,
            timestamp=self._clock.now_ms(),
        )
        record = Outgoing(END, codec.encode(end), [], end.half_partition, None)
        sender.produce_and_ack(record, ProducerSendSyncFailed, f"END of {transaction_id}")

    # -- internals ----------------------------------------------------------------------------

    def _end_record(self, sent: HalfSent, decision: TransactionDecision) -> EndTransaction:
        half_at = (sent.partition, sent.offset)
        return end_transaction(sent.half, decision, half_at, 0, self._clock.now_ms())

    def _half_partition(self, sender: Sender) -> int | None:
        """The HALF partition of this producer's half messages, chosen once at random: each
        fast-path group then writes one END partition (and its markers), not all of them.
        None (any) without the fast path."""
        if self._committer is None:
            return None
        if self._half_at is None:
            self._half_at = random.randrange(sender.topics.require(HALF))  # noqa: S311
        return self._half_at

    def _group_committer(self, config: ProducerConfig, sender: Sender) -> GroupCommitter:
        committer = GroupCommitter(
            functools.partial(lane_settings, config),
            name=self._group,
            fallback=lambda end: self._send_end(sender, end),
            timeout_s=config.send_timeout_ms / 1000,
            linger_ms=config.group_commit_ms,
            clock=self._clock,
        )
        committer.start(wait_s=config.send_timeout_ms / 1000)
        return committer

    def _taken(self, sent: HalfSent, end: EndTransaction) -> bool:
        """Whether a direct commit or the group committer took the producer's own decision;
        False: send its END plain (a ROLLBACK of a direct one, or too late for either)."""
        direct = self._direct
        if direct is not None and is_direct(sent.half):
            return direct.commit(sent.half, end)
        return self._commit_fast(sent.half, end)

    def _commit_fast(self, half: HalfMessage, end: EndTransaction) -> bool:
        """Hand the decision to the group committer (the message and END in one Kafka
        transaction of this producer); False when the fast path cannot take it, or not
        within its window (a decision after a slow local transaction)."""
        committer = self._committer
        if committer is None:
            return False
        records = []
        end_headers: list[tuple[str, bytes]] = []
        if end.decision is TransactionDecision.COMMIT:
            delivery = committed_delivery(half, check_times=0)
            topic = naming.kafka_topic(delivery.topic)
            records.append(Outgoing(topic, delivery.value, delivery.headers, None, None))
            end_headers.append((DELIVERED_HEADER, b"1"))
        records.append(Outgoing(END, codec.encode(end), end_headers, end.half_partition, None))
        write_by = half.born_timestamp + FAST_COMMIT_WINDOW_MS
        return committer.submit(Decision(end, tuple(records), write_by))

    def _send_end(self, sender: Sender, end: EndTransaction) -> None:
        """Hand an END record to the client, oneway: a lost one is settled by a check."""
        record = Outgoing(END, codec.encode(end), [], end.half_partition, None)

        def delivered(err: KafkaError | None, _msg: KafkaRecord) -> None:
            if err is not None:
                self._end_lost(end, err.str())

        try:
            sender.produce_oneway(record, ProducerException, on_delivery=delivered)
        except ProducerException as exc:
            self._end_lost(end, str(exc))

    def _end_lost(self, end: EndTransaction, why: str) -> None:
        self.end_failures += 1
        log.warning(
            "END %s of transaction %s not delivered (%s); a check will settle it",
            end.decision.value,
            end.transaction_id,
            why,
        )
