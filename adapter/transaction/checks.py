"""The producer side of the check-back: answering the coordinator's check requests.

Reproduces ``checkTransactionState`` of RocketMQ's producer (``ClientRemotingProcessor``): every
producer of a group reads the group's check topic (``%CHECK%<group>``) in one Kafka consumer
group, so any live producer of the group answers, as the broker picks any channel of the group,
including for messages a dead producer sent. ``checker_callback(msg)`` sees the half message
with ``TRANSACTION_CHECK_TIMES``; its ``COMMIT`` or ``ROLLBACK`` is written to END
(``from_check``) and acknowledged before the request's offset is committed (without waiting
for that commit: a lost one only brings the request back); ``UNKNOWN`` (or an
exception, ``None``, any other value) writes nothing and the coordinator asks again.

The requests already fetched are read together, and a half's request that a later one
replaces, or about a half this producer decided already, is not passed to the checker
(:mod:`adapter.transaction.check_backlog`): the backlog of requests that piles up while no
producer of the group is alive reaches the first one to start as one call per half.

A check request that cannot be read, or that names a HALF partition that does not exist, is
skipped with an error log and counted (:attr:`CheckResponder.unreadable`), never retried in a
loop: nothing is lost, since the coordinator asks again after the check interval. It is not
parked, because the application's principal may not write the poison topic (ACLs:
docs/production.md).

Known gaps: checks are answered by one thread per producer (the C++ client uses one too). A
check answer is at least once; the coordinator drops duplicate decisions.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka import Message as KafkaRecord

from adapter import naming
from adapter.clock import Clock
from adapter.config import GROUP_CONSUMER
from adapter.exceptions import AdapterError, ProducerException
from adapter.kafka import clients, reading, schemas
from adapter.kafka.topics import ensure_single_queue_topic
from adapter.message import ReceivedMessage
from adapter.producer.config import ProducerConfig
from adapter.producer.sender import Outgoing, Sender
from adapter.transaction import check_backlog as backlog
from adapter.transaction.envelope import checked_message, decide, end_transaction
from adapter.wire import codec
from adapter.wire.records import CheckRequest, TransactionDecision

log = logging.getLogger(__name__)

END = naming.kafka_topic(naming.TRANS_END_TOPIC)
_POLL_S = 0.2
_SHUTDOWN_WAIT_S = 10.0
_RETRY_ANSWER_S = 0.5
_UNKNOWN_TOPIC_GRACE_MS = 30_000
_BACKLOG_READ = 1000

Checker = Callable[[ReceivedMessage], Any]


class CheckResponder:
    """One thread that answers the check requests of a producer group until ``stop()``."""

    def __init__(self, sender: Sender, checker: Checker, clock: Clock) -> None:
        self._sender = sender
        self._checker = checker
        self._clock = clock
        self._group = sender.config.group
        self._stopping = threading.Event()
        self._consumer: Consumer | None = None
        self._thread: threading.Thread | None = None
        self.unreadable = 0
        """Check requests skipped because they could not be read (logged, not answered)."""
        self.skipped = 0
        """Check requests not passed to the checker: superseded, or about a decided half
        (:mod:`adapter.transaction.check_backlog`)."""
        self._decided = backlog.DecidedHalves()
        self._unknown_since_ms: int | None = None

    def start(self) -> None:
        """Create the group's check topic if needed and join its consumer group."""
        config = self._sender.config
        check_topic = naming.kafka_topic(naming.check_topic(config.group))
        admin = clients.admin(config.kafka.librdkafka({}), announce=True)
        ensure_single_queue_topic(admin, check_topic, self._sender.timeout_s)
        consumer = clients.consumer(check_consumer(config, check_topic), announce=True)
        consumer.subscribe([check_topic])
        self._consumer = consumer
        self._thread = threading.Thread(
            target=self._run, args=(consumer,), name=f"checks-{config.group}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Stop answering (waiting up to 10 s for a running ``checker_callback``) and leave
        the check topic's group."""
        self._stopping.set()
        thread, self._thread = self._thread, None
        consumer, self._consumer = self._consumer, None
        if thread is not None:
            thread.join(_SHUTDOWN_WAIT_S)
        if consumer is None:
            return
        if thread is not None and thread.is_alive():
            log.error(
                "producer %s: checker_callback still running after %.0f s; "
                "its check consumer is left to the process exit",
                self._group,
                _SHUTDOWN_WAIT_S,
            )
        else:
            consumer.close()

    def _run(self, consumer: Consumer) -> None:
        while not self._stopping.is_set():
            try:
                record = consumer.poll(_POLL_S)
                if record is None:
                    continue
                # What else is fetched already: a backlog is answered once per half.
                self._answer_all(consumer, [record, *consumer.consume(_BACKLOG_READ, 0)])
            except Exception:
                log.exception("producer %s: answering a check failed", self._group)
                self._stopping.wait(_RETRY_ANSWER_S)

    def _answer_all(self, consumer: Consumer, records: list[KafkaRecord]) -> None:
        """Answer the requests read together, in order and each half's last one only, then
        commit past them; from a request whose answer did not reach END, read again."""
        asked: list[tuple[KafkaRecord, CheckRequest]] = []
        done: KafkaRecord | None = None
        for record in records:
            failure = record.error()
            if failure is not None:
                self._report(failure)
                continue
            self._unknown_since_ms = None
            request = self._read(record)
            if request is not None:
                asked.append((record, request))
            done = record
        replaced = backlog.superseded([request for _record, request in asked])
        for index, (record, request) in enumerate(asked):
            if self._stopping.is_set():  # the rest is another producer's, or the next start's
                self._commit(consumer, record, offset_of(record))
                return
            if index in replaced or not self._decided.needs_answer(request):
                self.skipped += 1
            elif not self._answer(request):
                # Not committed: read the request again and ask the callback again.
                self._commit(consumer, record, offset_of(record))
                consumer.seek(position(record, offset_of(record)))
                self._stopping.wait(_RETRY_ANSWER_S)
                return
        if done is not None:
            self._commit(consumer, done, offset_of(done) + 1)

    def _report(self, failure: KafkaError) -> None:
        """A consumer error, logged; a check topic that was just created is unknown to the
        consumer for a moment (metadata propagation), so that is a warning only when it lasts
        past ``_UNKNOWN_TOPIC_GRACE_MS``."""
        if failure.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            now = self._clock.now_ms()
            if self._unknown_since_ms is None:
                self._unknown_since_ms = now
            if now - self._unknown_since_ms < _UNKNOWN_TOPIC_GRACE_MS:
                log.debug("check topic of %s not known yet: %s", self._group, failure.str())
                return
        log.warning("check topic of %s: %s", self._group, failure.str())

    def _read(self, record: KafkaRecord) -> CheckRequest | None:
        """The check request in ``record``, or ``None`` (logged and counted) if unreadable."""
        try:
            lookup = schemas.lookup_for(self._sender.config.kafka)
            request = reading.decode(CheckRequest, record, lookup=lookup)
            ends = self._sender.topics.count(END)
            if not 0 <= request.half_partition < ends:
                raise AdapterError(
                    f"half partition {request.half_partition} is not one of END's {ends}"
                )
        except AdapterError as exc:
            self.unreadable += 1
            log.error(
                "producer %s: skipped unreadable check request %s %d@%d: %s",
                self._group,
                record.topic(),
                record.partition() or 0,
                offset_of(record),
                exc,
            )
            return None
        return request

    def _answer(self, request: CheckRequest) -> bool:
        """Ask the checker and write its decision to END; ``False`` if the write failed."""
        tid = request.transaction_id
        what = f"checker_callback (check {request.check_times})"
        decision = decide(self._checker, what, tid, checked_message(request))
        if decision is not TransactionDecision.UNKNOWN:
            half_at = (request.half_partition, request.half_offset)
            now = self._clock.now_ms()
            end = end_transaction(request, decision, half_at, request.check_times, now)
            answer = Outgoing(END, codec.encode(end), [], request.half_partition, None)
            try:
                self._sender.produce_and_ack(answer, ProducerException, f"answer to {tid}")
            except ProducerException as exc:
                log.warning("%s; the check will be answered again", exc)
                return False
            self._decided.remember(request)
        return True

    def _commit(self, consumer: Consumer, record: KafkaRecord, next_offset: int) -> None:
        """Commit past an answered request without waiting: the answer is on END already, so
        a commit that is lost (a crash, a moving group coordinator) only brings the request
        back, answered again and dropped by the coordinator as a duplicate. Waiting would put
        a round trip to the group coordinator, and all of its failover, before every next
        answer."""
        try:
            consumer.commit(offsets=[position(record, next_offset)], asynchronous=True)
        except KafkaException as exc:
            log.warning("producer %s: check offset not committed: %s", self._group, exc)


def check_consumer(config: ProducerConfig, check_topic: str) -> dict[str, Any]:
    """All producers of a group share one consumer group on the group's check topic."""
    return config.kafka.librdkafka(
        {
            "group.id": check_topic,
            "client.id": f"{config.group}@{config.instance_name}-checks",
            **GROUP_CONSUMER,
            "session.timeout.ms": 6000,
        }
    )


def offset_of(record: KafkaRecord) -> int:
    offset = record.offset()
    return 0 if offset is None else offset


def position(record: KafkaRecord, offset: int) -> TopicPartition:
    """``offset`` in ``record``'s partition."""
    return TopicPartition(record.topic() or "", record.partition() or 0, offset)
