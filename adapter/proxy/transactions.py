"""Transactional messages through the proxy: half messages, decisions, and check-backs.

Reproduces RocketMQ 5's transactions as its proxy serves them, on the adapter's cores:

- a 5.x producer has no group; the proxy uses the message's *topic* as the producer group (as
  RocketMQ's proxy and :mod:`adapter.v5.transactional` do), so every 5.x client of a topic,
  through any proxy or through ``adapter.v5``, shares the topic's check-backs. Each topic gets
  one :class:`~adapter.transaction.producer.TransactionMQProducer` in this process, started at
  the topic's first transactional message (or when a producer announces a topic declared
  ``TRANSACTION``), and closed once no client of the topic was connected for
  ``transactional_idle_s``, so that the topic's checks go to a proxy that has one;
- ``SendMessage`` of a TRANSACTION message writes the half message (``send_half``: the
  client's message id is its ``UNIQ_KEY`` and transaction id) and answers with a
  :class:`~adapter.proxy.handles.TransactionHandle`;
- ``EndTransaction`` (source CLIENT) decides it through ``end_half``, the fast path when the
  decision comes in time and this proxy sent the half message; otherwise, or from another
  proxy, by the handle (``end_named``). A COMMIT that a direct commit takes waits on nothing
  and is applied on the event loop (``end_at_once``); any other decision on a thread. A
  resolution that is neither COMMIT nor ROLLBACK changes nothing, as an UNKNOWN local
  transaction in RocketMQ;
- a check request of the coordinator (:mod:`adapter.transaction.checks` reads the group's
  check topic) is pushed to a live client of the topic as ``RecoverOrphanedTransactionCommand``
  on its Telemetry stream, with a handle naming the check; the client's
  ``TransactionChecker`` answers with an ``EndTransaction`` of source SERVER_CHECK, written as
  the answer to that check. With no client of the topic here, the check is left to the next
  one (the coordinator asks again after its check interval), as RocketMQ's proxy does.

Known gaps: a check goes to one client, picked at random among this proxy's clients of the
topic; it is not sent again if that client dies before answering (the next check will be).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from typing import Any

from adapter import naming
from adapter import properties as prop
from adapter.clock import SYSTEM_CLOCK, Clock
from adapter.exceptions import ProducerException
from adapter.message import ReceivedMessage
from adapter.proxy.codes import Code, ProxyError
from adapter.proxy.config import ProxyConfig
from adapter.proxy.handles import TransactionHandle, stable_born_ms
from adapter.proxy.messages import Outbound, resource_name, to_protocol
from adapter.proxy.metrics import ProxyMetrics
from adapter.proxy.protocol import definition, service
from adapter.proxy.sessions import Sessions
from adapter.transaction.producer import HalfSent, TransactionMQProducer, TransactionStatus
from adapter.v5.transactional import shut_down_all
from adapter.wire.records import TransactionDecision

__all__ = ["Transactions"]

log = logging.getLogger(__name__)

RECENT_SENDS = 100_000
RECENT_S = 10.0
"""A half message sent here is decided through the fast path for this long after its send."""
_DECISIONS = {
    definition.TransactionResolution.COMMIT: TransactionDecision.COMMIT,
    definition.TransactionResolution.ROLLBACK: TransactionDecision.ROLLBACK,
}
_SOURCES = {
    definition.TransactionSource.SOURCE_UNSPECIFIED,
    definition.TransactionSource.SOURCE_CLIENT,
    definition.TransactionSource.SOURCE_SERVER_CHECK,
}


class Transactions:
    """The transactional producers of the topics this proxy's clients use."""

    def __init__(
        self,
        config: ProxyConfig,
        sessions: Sessions,
        metrics: ProxyMetrics,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._config = config
        self._sessions = sessions
        self._metrics = metrics
        self._clock = clock
        self._producers: dict[str, TransactionMQProducer] = {}
        self._starting: dict[str, threading.Lock] = {}
        self._unserved_since: dict[str, float] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._recent: OrderedDict[tuple[str, str], tuple[HalfSent, float]] = OrderedDict()
        """(topic, handle) -> the half message sent here, and when."""

    # -- the producers ------------------------------------------------------------------------

    def producer(self, topic: str) -> TransactionMQProducer:
        """The started producer of ``topic`` (blocking: a start joins the check group; the
        other topics' producers are not held up meanwhile)."""
        with self._lock:
            if self._closed:
                raise ProxyError(Code.INTERNAL_SERVER_ERROR, "the proxy is stopping")
            found = self._producers.get(topic)
            if found is not None:
                return found
            starting = self._starting.setdefault(topic, threading.Lock())
        with starting:
            with self._lock:
                found = self._producers.get(topic)
            if found is not None:
                return found
            producer = self._start(topic)
            with self._lock:
                self._starting.pop(topic, None)
                closed = self._closed
                if not closed:
                    self._producers[topic] = producer
            if closed:
                producer.shutdown()
                raise ProxyError(Code.INTERNAL_SERVER_ERROR, "the proxy is stopping")
            log.info("transactional producer of %s started (its check-backs come here)", topic)
            return producer

    def _start(self, topic: str) -> TransactionMQProducer:
        producer = TransactionMQProducer(
            topic,
            lambda received: self._check(topic, received),
            timeout=self._config.send_timeout_ms,
            max_message_size=self._config.max_body_size,
            kafka=self._config.kafka,
        )
        producer.set_instance_name(f"proxy-{self._config.instance_id}")
        try:
            producer.start()
        except ProducerException as exc:
            raise ProxyError(
                Code.INTERNAL_SERVER_ERROR, f"transactions on {topic!r}: {exc}"
            ) from exc
        return producer

    def started(self) -> set[str]:
        with self._lock:
            return set(self._producers)

    def close_unserved(self) -> list[str]:
        """Close the producers of topics without a client here for ``transactional_idle_s``
        (blocking); the topics closed."""
        now = time.monotonic()
        served = self._sessions.topics()
        idle: list[TransactionMQProducer] = []
        closed: list[str] = []
        with self._lock:
            for topic in list(self._producers):
                if topic in served:
                    self._unserved_since.pop(topic, None)
                    continue
                since = self._unserved_since.setdefault(topic, now)
                if now - since >= self._config.transactional_idle_s:
                    idle.append(self._producers.pop(topic))
                    self._unserved_since.pop(topic, None)
                    closed.append(topic)
        for producer in idle:
            producer.shutdown()
        for topic in closed:
            log.info("transactional producer of topic %s closed: no client of it here", topic)
        return closed

    def close(self) -> None:
        """Shut every producer down: running checks end, open groups commit, END records go out."""
        with self._lock:
            self._closed = True
            producers, self._producers = list(self._producers.values()), {}
        shut_down_all(producers)

    # -- sending and deciding -----------------------------------------------------------------

    def send_half(self, out: Outbound, client_id: str) -> tuple[str, int]:
        """Write ``out``'s half message (blocking); its handle and HALF offset."""
        producer = self.producer(out.topic)
        options = self._half_options(out, client_id)
        try:
            sent = producer.send_half(out.wire, out.message_id, **options)
        except ProducerException as exc:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, f"half message: {exc}") from exc
        return self._sent(out.topic, sent)

    def ready_for(self, topic: str) -> TransactionMQProducer | None:
        """The started producer of ``topic`` when a half message to it is sent without
        waiting for anything but Kafka's acknowledgement (for the event loop); else None."""
        with self._lock:
            producer = self._producers.get(topic)
        if producer is None or not producer.ready_for(naming.kafka_topic(topic)):
            return None
        return producer

    async def send_half_async(
        self, producer: TransactionMQProducer, out: Outbound, client_id: str
    ) -> tuple[str, int]:
        """:meth:`send_half` on the event loop, through ``producer`` (:meth:`ready_for`)."""
        options = self._half_options(out, client_id)
        try:
            half, record = producer.half_record(out.wire, out.message_id, **options)
            sent = await producer.send_built_half(half, record)
        except ProducerException as exc:
            raise ProxyError(Code.INTERNAL_SERVER_ERROR, f"half message: {exc}") from exc
        return self._sent(out.topic, sent)

    def _half_options(self, out: Outbound, client_id: str) -> dict[str, Any]:
        """How ``out``'s half message is sent, on either path: with a stamp and key that put a
        copy retried through another proxy in the same HALF partition. The client serves the
        topic's check-backs from now on."""
        self._sessions.serve(client_id, [out.topic])
        stamp = stable_born_ms(out.message_id, self._clock.now_ms())
        return {"copy_stamp": stamp, "key": client_id or out.message_id}

    def _sent(self, topic: str, sent: HalfSent) -> tuple[str, int]:
        """Remember a half message sent here (for the fast path); its handle and offset."""
        handle = TransactionHandle(sent.partition, sent.offset).encode()
        now = time.monotonic()
        with self._lock:
            self._recent[(topic, handle)] = (sent, now)
            recent = self._recent
            while len(recent) > RECENT_SENDS or now - next(iter(recent.values()))[1] > RECENT_S:
                recent.popitem(last=False)  # oldest first: undecided ones do not pile up
        return handle, sent.offset

    def end(self, request: Any) -> None:
        """An ``EndTransaction`` request, applied (blocking)."""
        if request.source not in _SOURCES:
            raise ProxyError(Code.BAD_REQUEST, f"unknown transaction source {request.source}")
        resolution = request.resolution
        if resolution not in _DECISIONS and resolution != 0:
            raise ProxyError(Code.BAD_REQUEST, f"unknown transaction resolution {resolution}")
        topic = resource_name(request.topic)
        message_id = str(request.message_id)
        if not message_id:
            raise ProxyError(Code.ILLEGAL_MESSAGE_ID, "no message id")
        handle = TransactionHandle.decode(str(request.transaction_id))
        from_check = request.source == definition.TransactionSource.SOURCE_SERVER_CHECK
        if resolution not in _DECISIONS:
            log.info("transaction %s of %s left to a check (%s)", message_id, topic, resolution)
            return
        decision = _DECISIONS[resolution]
        producer = self.producer(topic)
        recent = self._take_recent(topic, request.transaction_id, message_id)
        try:
            if recent is not None and not from_check:
                producer.end_half(recent[0], decision)
            else:
                checks = max(handle.check_times, 1) if from_check else 0
                producer.end_named(
                    message_id,
                    (handle.half_partition, handle.half_offset),
                    decision,
                    check_times=checks,
                )
        except ValueError as exc:
            raise ProxyError(Code.INVALID_TRANSACTION_ID, str(exc)) from exc
        except ProducerException as exc:
            raise ProxyError(
                Code.INTERNAL_SERVER_ERROR,
                f"the decision on {message_id} did not reach Kafka ({exc}); a check will ask again",
            ) from exc

    def end_at_once(self, request: Any) -> bool:
        """A client's COMMIT of a half message sent here moments ago, applied on the calling
        thread when that waits on nothing (a direct commit: :meth:`TransactionMQProducer.
        end_without_waiting`); False: nothing was done, and :meth:`end` applies it."""
        if (
            request.source == definition.TransactionSource.SOURCE_SERVER_CHECK
            or request.resolution != definition.TransactionResolution.COMMIT
        ):
            return False
        topic, key = resource_name(request.topic), str(request.transaction_id)
        with self._lock:
            producer = self._producers.get(topic)
        if producer is None:
            return False
        found = self._take_recent(topic, key, str(request.message_id))
        if found is None:
            return False
        if producer.end_without_waiting(found[0], TransactionDecision.COMMIT):
            return True
        with self._lock:  # taken above, so no one else holds it: end() finds it again
            self._recent[(topic, key)] = found
        return False

    def _take_recent(
        self, topic: str, handle: str, message_id: str
    ) -> tuple[HalfSent, float] | None:
        """The half message of ``handle`` sent here, and when, taken out (so that one decision
        only takes the fast path); None when it is not one of the last ``RECENT_S``."""
        with self._lock:
            found = self._recent.pop((topic, handle), None)
        if found is None:
            return None
        sent, at = found
        if sent.transaction_id != message_id or time.monotonic() - at > RECENT_S:
            return None
        return found

    # -- check-backs --------------------------------------------------------------------------

    def _check(self, topic: str, received: ReceivedMessage) -> TransactionStatus:
        """The checker of ``topic``'s producer: hand the check to a client, decide nothing."""
        session = self._sessions.any_of_topic(topic)
        times = received.properties.get(prop.TRANSACTION_CHECK_TIMES, b"1")
        check_times = int(times) if times.isdigit() else 1
        if session is None:
            self._metrics.checks.labels("no_client").inc()
            log.info(
                "check %d of %s (topic %s): no client of the topic here; asked again later",
                check_times,
                received.id,
                topic,
            )
            return TransactionStatus.UNKNOWN
        handle = TransactionHandle(received.queue_id, received.queue_offset, check_times)
        command = service.TelemetryCommand(
            recover_orphaned_transaction_command=service.RecoverOrphanedTransactionCommand(
                message=to_protocol(received, message_type=definition.MessageType.TRANSACTION),
                transaction_id=handle.encode(),
            )
        )
        sent = session.push(command)
        self._metrics.checks.labels("sent" if sent else "no_client").inc()
        return TransactionStatus.UNKNOWN
