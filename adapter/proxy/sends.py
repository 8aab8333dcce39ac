"""``SendMessage`` and ``RecallMessage``: a 5.x producer's messages onto Kafka.

Reproduces RocketMQ 5's ``SendMessageActivity`` and ``RecallMessageActivity`` on the
adapter's send core (:class:`~adapter.producer.sender.Sender`, the same that ``adapter.v5``
and the 2.0 producers use), each message as :mod:`adapter.proxy.messages` checks it:

- NORMAL: the record, acknowledged by Kafka (acks=all, idempotent);
- FIFO: the message group chooses the queue by RocketMQ's hash over the topic's partitions,
  and keys the record, as ``adapter.v5`` does, so one group's messages stay in one partition
  in send order whichever client (Java, Python, ``adapter.v5``) sent them;
- DELAY: a timer up to 40 days ahead through the schedule's hops (:mod:`adapter.v5.timers`),
  whose receipt carries a recall handle; a time already past is sent at once;
- TRANSACTION: a half message (:mod:`adapter.proxy.transactions`);
- PRIORITY: the record, in its priority's band of a topic made for priorities, as
  ``adapter.v5`` sends it (:mod:`adapter.priorities`).

A NORMAL or FIFO message to a topic whose queues the proxy knows, and a half message to a
topic whose transactional producer runs here and whose topics it looked up lately, are built
and produced on the event loop, which awaits Kafka's acknowledgement
(:func:`adapter.kafka.writing.produce_and_await`); anything that may wait on Kafka before its
produce (a topic not looked up lately, a producer to start, a timer, a priority band) goes to
a worker thread.

Several messages in one request are a batch: each is sent on its own and gets its own entry
(status, message id, offset; transaction id or recall handle); the response's status is the
first failure's, or OK. The topic must exist (``TOPIC_NOT_FOUND``, once it was looked for
during a second: one created a moment ago is found). The proxy takes at most ``max_inflight``
messages at once and answers ``TOO_MANY_REQUESTS`` beyond, which the clients retry with
back-off.

Known gaps: a batch is not atomic (RocketMQ stores a batch in one go): some entries may
succeed while others fail. The queue a Java client picks for a NORMAL message is not used
(librdkafka's sticky partitioner spreads them).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from concurrent.futures import Executor
from typing import Any

from confluent_kafka import KafkaException

from adapter import naming
from adapter.exceptions import AdapterError, ProducerException
from adapter.kafka.metadata import MissingTopic
from adapter.producer import routing
from adapter.producer.sender import Outgoing, Sender
from adapter.proxy import codes
from adapter.proxy.auth import Account, Perm
from adapter.proxy.codes import Code, ProxyError
from adapter.proxy.config import ProxyConfig
from adapter.proxy.messages import Outbound, outbound, resource_name
from adapter.proxy.metrics import ProxyMetrics
from adapter.proxy.protocol import service
from adapter.proxy.transactions import Transactions
from adapter.schedule.recall import BadRecallHandle
from adapter.transaction.producer import TransactionMQProducer
from adapter.v5 import timers

__all__ = ["Sends"]

log = logging.getLogger(__name__)


_PLAIN = frozenset({"NORMAL", "FIFO"})
"""The kinds of message the event loop sends itself when their topic's queues are known."""

NEW_TOPIC_WAIT_S = 1.0
"""How long a topic unknown to the proxy is looked for (one created a moment ago)."""


class _SendFailed(ProducerException):
    """How the send core reports a failure here (turned into a code at once)."""


class Sends:
    def __init__(
        self,
        config: ProxyConfig,
        sender: Sender,
        transactions: Transactions,
        metrics: ProxyMetrics,
        executor: Executor,
    ) -> None:
        self._config = config
        self._sender = sender
        self._transactions = transactions
        self._metrics = metrics
        self._executor = executor
        self._inflight = 0
        self._lock = threading.Lock()

    async def send(self, request: Any, account: Account, client_id: str) -> Any:
        count = len(request.messages)
        if not count:
            raise ProxyError(Code.BAD_REQUEST, "no message to send")
        with self._lock:
            if self._inflight + count > self._config.max_inflight:
                raise ProxyError(
                    Code.TOO_MANY_REQUESTS,
                    f"{self._inflight} messages in flight, at most {self._config.max_inflight}",
                )
            self._inflight += count
        try:
            if count == 1:  # the usual request: no task to gather
                entries = [await self._entry(request.messages[0], account, client_id)]
            else:
                entries = await asyncio.gather(
                    *(self._entry(m, account, client_id) for m in request.messages)
                )
        finally:
            with self._lock:
                self._inflight -= count
        failed = next((e.status for e in entries if e.status.code != Code.OK), None)
        return service.SendMessageResponse(status=failed or codes.status(), entries=entries)

    async def _entry(self, message: Any, account: Account, client_id: str) -> Any:
        """One message sent, as its entry of the response."""
        message_id = str(message.system_properties.message_id)
        try:
            out = outbound(
                message,
                max_body_size=self._config.max_body_size,
                accepted=self._config.accepted_types,
            )
            account.require(Perm.PUB, topic=out.topic)
            record = self._plain_record(out)
            producer = self._half_producer(out)
            if record is not None:
                what = f"{out.message_id} to {out.topic}"
                ack = await self._sender.produce_and_await(record, _SendFailed, what)
                entry = _entry(out.message_id, ack.offset)
            elif producer is not None:
                transactions = self._transactions
                handle, offset = await transactions.send_half_async(producer, out, client_id)
                entry = _entry(out.message_id, offset, transaction_id=handle)
            else:  # building or sending it may wait on Kafka: a worker thread
                loop = asyncio.get_running_loop()
                entry = await loop.run_in_executor(self._executor, self._send, out, client_id)
            self._metrics.messages.labels(out.kind).inc()
            return entry
        except Exception as exc:  # noqa: BLE001 - each entry answers for itself
            error = codes.of_exception(exc, f"send {message_id or 'message'}")
            if error.code in (Code.INTERNAL_SERVER_ERROR, Code.PROXY_TIMEOUT):
                log.warning("%s", error)
            return service.SendResultEntry(
                status=codes.status(error.code, error.message), message_id=message_id
            )

    def _plain_record(self, out: Outbound) -> Outgoing | None:
        """The record of a NORMAL or FIFO message to a topic whose queues are known, built
        on the event loop (most sends: one thread hand-off fewer each way); None when building
        it may wait on Kafka (a topic not looked up lately, a timer, a half, a priority)."""
        if out.kind not in _PLAIN or out.deliver_at_ms is not None or out.wire.delay_time_level > 0:
            return None
        queues = self._sender.topics.cached(naming.kafka_topic(out.topic))
        return self._record(out, queues) if queues else None

    def _half_producer(self, out: Outbound) -> TransactionMQProducer | None:
        """The producer of a TRANSACTION message's half, when it is built on the event loop
        without waiting on Kafka (its topic's producer started and its topics looked up
        lately); None otherwise."""
        if out.kind != "TRANSACTION" or out.deliver_at_ms is not None:
            return None
        return self._transactions.ready_for(out.topic)

    def _record(self, out: Outbound, queues: int) -> Outgoing:
        """``out``'s record on its topic of ``queues`` partitions: a FIFO message group picks
        its queue by RocketMQ's hash and keys the record."""
        group = out.message_group
        partition = None if group is None else routing.queue_for_sharding_key(group, queues)
        return self._sender.record(
            out.wire, out.message_id, _SendFailed, partition=partition, key=group
        )

    def _require_topic(self, topic: str) -> int:
        """``topic``'s partition count; ``TOPIC_NOT_FOUND`` when it does not exist."""
        try:
            return self._sender.topics.require(naming.kafka_topic(topic), wait_s=NEW_TOPIC_WAIT_S)
        except MissingTopic as exc:
            raise ProxyError(Code.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist") from exc

    def _send(self, out: Outbound, client_id: str) -> Any:
        """``out`` sent from a worker thread: its topic looked up, then sent as its kind is."""
        queues = self._require_topic(out.topic)
        sender, message_id = self._sender, out.message_id
        what = f"{message_id} to {out.topic}"
        if out.kind == "TRANSACTION":
            handle, offset = self._transactions.send_half(out, client_id)
            return _entry(message_id, offset, transaction_id=handle)
        recall_handle = ""
        record = None
        if out.deliver_at_ms is not None:
            try:
                record = timers.timer_record(sender, out.wire, message_id, out.deliver_at_ms)
            except ValueError as exc:
                raise ProxyError(Code.ILLEGAL_DELIVERY_TIME, str(exc)) from exc
            if record is not None:
                recall_handle = timers.recall_handle(
                    sender, out.topic, message_id, out.deliver_at_ms
                )
        if record is None:
            record = self._record(out, queues)
            if out.priority is not None:  # its band of a topic made for priorities
                record = record._replace(topic=sender.bands.route(record.topic, out.priority))
        ack = sender.produce_and_ack(record, _SendFailed, what)
        return _entry(message_id, ack.offset, recall_handle=recall_handle)

    async def recall(self, request: Any, account: Account) -> Any:
        topic = resource_name(request.topic)
        account.require(Perm.PUB, topic=topic)
        if not request.recall_handle:
            raise ProxyError(Code.BAD_REQUEST, "no recall handle")
        call = functools.partial(timers.recall, self._sender, topic, str(request.recall_handle))
        try:
            message_id = await asyncio.get_running_loop().run_in_executor(self._executor, call)
        except BadRecallHandle as exc:
            raise ProxyError(Code.BAD_REQUEST, str(exc)) from exc
        except AdapterError as exc:
            raise ProxyError(Code.BAD_REQUEST, f"recall: {exc}") from exc
        except KafkaException as exc:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, f"recall: {exc}") from exc
        return service.RecallMessageResponse(status=codes.status(), message_id=message_id)


def _entry(
    message_id: str, offset: int, *, transaction_id: str = "", recall_handle: str = ""
) -> Any:
    return service.SendResultEntry(
        status=codes.status(),
        message_id=message_id,
        transaction_id=transaction_id,
        offset=offset,
        recall_handle=recall_handle,
    )
