"""``ReceiveMessage``, ``AckMessage``, ``ChangeInvisibleDuration``,
``ForwardMessageToDeadLetterQueue``: simple and push consumers over gRPC.

Reproduces RocketMQ 5's pop consumption at the proxy (``ReceiveMessageActivity``,
``AckMessageActivity``, ``ChangeInvisibleDurationActivity``) on the engine behind
``adapter.v5.SimpleConsumer`` (a Kafka share group, :mod:`adapter.v5.share_pool`): the proxy keeps
one such consumer per consumer group, subscribed to every topic its clients receive from, with
the filter expression each client sent. A receive long-polls up to the request's
``long_polling_timeout`` and answers a stream: a status (``OK``, or ``MESSAGE_NOT_FOUND`` when
nothing came), then each message with its ``receipt_handle`` and ``delivery_attempt``, then the
``delivery_timestamp`` of the answer. A message not acked within its invisible duration comes
back with its delivery attempt + 1; acks are answered per entry.

A Kafka share group settles a record only through the consumer that acquired it, so a receipt
handle names the proxy that handed the message out, and an ack, a change or a dead-letter
forward that reaches another proxy is passed on to it (:mod:`adapter.proxy.peers`).

A FIFO group (``--fifo-groups``, RocketMQ's ``consumeMessageOrderly``) is served by a
:class:`~adapter.v5.fifo_consumer.FifoSimpleConsumer` instead: the next message of a message
group only once the one before is acked.

Known gaps: when the proxy stops, the messages its clients hold go back to their groups at
once (no ack can reach it any more), which may be before their invisible duration.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from google.protobuf.timestamp_pb2 import Timestamp

from adapter.clock import SYSTEM_CLOCK, Clock
from adapter.proxy.auth import Account, Perm
from adapter.proxy.codes import Code, ProxyError, status
from adapter.proxy.config import Address, ProxyConfig
from adapter.proxy.messages import resource_name, to_resource
from adapter.proxy.peers import Peers, join, split
from adapter.proxy.protocol import definition, service
from adapter.v5 import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer
from adapter.v5.exception import ClientException
from adapter.v5.fifo_consumer import FifoSimpleConsumer
from adapter.v5.filter_expression import FilterType
from adapter.v5.message import Message

__all__ = ["Receives", "to_protocol"]

log = logging.getLogger(__name__)

MAX_POLL_S = 30.0
"""The longest long poll served (RocketMQ's proxy caps it too)."""
DEADLINE_MARGIN_S = 0.5
"""A long poll ends this long before the caller's deadline, so that its answer arrives."""


@dataclass(frozen=True, slots=True)
class Received:
    group: str
    messages: list[Message]


def _timestamp(ms: int | None) -> Timestamp:
    stamp = Timestamp()
    if ms is not None:
        stamp.FromMilliseconds(ms)
    return stamp


def to_protocol(message: Message) -> Any:
    """A received 5.x message as the protocol's ``Message``."""
    body = message.body or b""
    system = definition.SystemProperties(
        message_id=message.message_id or "",
        body_digest=definition.Digest(
            type=definition.DigestType.MD5,
            checksum=hashlib.md5(body, usedforsecurity=False).hexdigest().upper(),
        ),
        receipt_handle=message.receipt_handle or "",
        delivery_attempt=message.delivery_attempt or 1,
        body_encoding=definition.Encoding.IDENTITY,
        message_type=definition.MessageType.NORMAL,
        born_timestamp=_timestamp(message.born_timestamp),
        store_timestamp=_timestamp(message.store_timestamp),
    )
    if message.tag:
        system.tag = message.tag
    system.keys.extend(sorted(message.keys))
    if message.message_group:
        system.message_group = message.message_group
        system.message_type = definition.MessageType.FIFO
    if message.delivery_timestamp:
        system.delivery_timestamp.CopyFrom(_timestamp(message.delivery_timestamp))
        system.message_type = definition.MessageType.DELAY
    if message.priority is not None:
        system.priority = message.priority
        system.message_type = definition.MessageType.PRIORITY
    return definition.Message(
        topic=to_resource(message.topic or ""),
        user_properties=dict(message.properties),
        system_properties=system,
        body=body,
    )


def _filter(request: Any) -> FilterExpression:
    expression = request.filter_expression
    if expression.type == definition.FilterType.SQL:
        return FilterExpression(expression.expression, FilterType.SQL)
    return FilterExpression(expression.expression or "*")


def _seconds(duration: Any, default: float) -> float:
    total = duration.seconds + duration.nanos / 1e9
    return total if total > 0 else default


class Receives:
    """One ``SimpleConsumer`` per consumer group, started on its first receive."""

    def __init__(self, config: ProxyConfig, peers: Peers, clock: Clock = SYSTEM_CLOCK) -> None:
        self._config = config
        self._peers = peers
        self._clock = clock
        self._lock = threading.Lock()
        self._consumers: dict[str, SimpleConsumer] = {}

    def _consumer(self, group: str, topic: str, expression: FilterExpression) -> SimpleConsumer:
        with self._lock:
            consumer = self._consumers.get(group)
            if consumer is None:
                configuration = ClientConfiguration(
                    self._config.kafka.bootstrap_servers, Credentials()
                )
                kind = FifoSimpleConsumer if group in self._config.fifo_groups else SimpleConsumer
                consumer = kind(configuration, group, {topic: expression})
                consumer.startup()
                self._consumers[group] = consumer
                log.info("consumer group %s served here (topic %s)", group, topic)
            else:
                consumer.subscribe(topic, expression)
            return consumer

    def _held(self, group: str) -> SimpleConsumer:
        with self._lock:
            consumer = self._consumers.get(group)
        if consumer is None:
            raise ProxyError(
                Code.INVALID_RECEIPT_HANDLE,
                f"group {group!r} received nothing at this proxy: its receipt handles are "
                "another proxy's (the message comes back after its invisible duration)",
            )
        return consumer

    def receive(self, request: Any, account: Account, budget_s: float | None = None) -> Received:
        """One ``ReceiveMessage`` call's messages, polled for at most its long-polling timeout
        and within ``budget_s`` (what is left of the caller's deadline, less a margin, so
        that the answer reaches a client that is still waiting)."""
        started = self._clock.monotonic()
        group = resource_name(request.group, "consumer group")
        topic = resource_name(request.message_queue.topic)
        account.require(Perm.SUB, topic=topic, group=group)
        if request.batch_size <= 0:
            raise ProxyError(Code.BAD_REQUEST, "batch_size must be greater than 0")
        invisible = _seconds(request.invisible_duration, 30.0)
        poll = min(_seconds(request.long_polling_timeout, 20.0), MAX_POLL_S)
        try:
            consumer = self._consumer(group, topic, _filter(request))
            if budget_s is not None:
                left = budget_s - (self._clock.monotonic() - started) - DEADLINE_MARGIN_S
                poll = max(min(poll, left), 0.0)
            consumer.await_duration = poll
            messages = consumer.receive(request.batch_size, invisible) if poll > 0 else []
        except ClientException as exc:
            raise ProxyError(_code_of(exc), str(exc)) from exc
        return Received(group, messages)

    def release(self, received: Received) -> None:
        """Give back at once the messages of a call whose client stopped waiting: it never
        saw them, so they must not stay invisible for their whole duration."""
        consumer = self._consumers.get(received.group)
        for message in received.messages:
            try:
                if consumer is not None:
                    consumer.change_invisible_duration(message, 0)
            except ClientException as exc:
                log.info("message %s not given back early: %s", message.message_id, exc)
        if received.messages:
            log.info(
                "%d messages of group %s given back: their caller stopped waiting",
                len(received.messages),
                received.group,
            )

    def answers(self, received: Received) -> list[Any]:
        """The responses of one ``ReceiveMessage`` call, in order."""
        messages = received.messages
        answers = [
            service.ReceiveMessageResponse(
                status=status() if messages else status(Code.MESSAGE_NOT_FOUND, "no new message")
            )
        ]
        for message in messages:
            sent = to_protocol(message)
            handle = sent.system_properties.receipt_handle
            sent.system_properties.receipt_handle = join(handle, self._peers.me)
            answers.append(service.ReceiveMessageResponse(message=sent))
        if messages:
            answers.append(
                service.ReceiveMessageResponse(delivery_timestamp=_timestamp(self._clock.now_ms()))
            )
        return answers

    def ack(self, request: Any, account: Account, metadata: Mapping[str, str]) -> Any:
        """Each entry settled here, or by the proxy its handle names (:mod:`.peers`)."""
        group = resource_name(request.group, "consumer group")
        topic = resource_name(request.topic)
        account.require(Perm.SUB, topic=topic, group=group)
        outcomes: dict[int, Any] = {}
        elsewhere: dict[Address, list[int]] = {}
        for index, entry in enumerate(request.entries):
            inner, named = split(entry.receipt_handle)
            peer = self._peers.other(named)
            if peer is None:
                outcomes[index] = self._ack_here(group, inner)
            else:
                elsewhere.setdefault(peer, []).append(index)
        for peer, indexes in elsewhere.items():
            passed = service.AckMessageRequest(group=request.group, topic=request.topic)
            passed.entries.extend(request.entries[i] for i in indexes)
            refused = status(Code.INVALID_RECEIPT_HANDLE, f"proxy {peer} did not answer for it")
            try:
                answer = self._peers.pass_on("AckMessage", passed, peer, metadata)
                settled = {e.receipt_handle: e.status for e in answer.entries}
            except ProxyError as exc:
                settled, refused = {}, status(exc.code, exc.message)
            for i in indexes:
                outcomes[i] = settled.get(request.entries[i].receipt_handle, refused)
        entries = [
            service.AckMessageResultEntry(
                message_id=entry.message_id, receipt_handle=entry.receipt_handle, status=outcomes[i]
            )
            for i, entry in enumerate(request.entries)
        ]
        failed = [e for e in entries if e.status.code != Code.OK]
        overall = status() if not failed else status(Code.MULTIPLE_RESULTS, "some acks failed")
        if failed and len(failed) == len(entries):
            overall = failed[0].status
        return service.AckMessageResponse(status=overall, entries=entries)

    def _ack_here(self, group: str, handle: str) -> Any:
        held = Message()
        held.receipt_handle = handle
        try:
            self._held(group).ack(held)
        except ProxyError as exc:
            return status(exc.code, exc.message)
        except ClientException as exc:
            return status(Code.INVALID_RECEIPT_HANDLE, str(exc))
        return status()

    def change(self, request: Any, account: Account, metadata: Mapping[str, str]) -> Any:
        peer = self._holder(request, account)
        if peer is not None:
            return self._peers.pass_on("ChangeInvisibleDuration", request, peer, metadata)
        consumer, held = self._held_message(request)
        try:
            consumer.change_invisible_duration(held, _seconds(request.invisible_duration, 0.0))
        except ClientException as exc:
            raise ProxyError(_code_of(exc, Code.INVALID_RECEIPT_HANDLE), str(exc)) from exc
        return service.ChangeInvisibleDurationResponse(
            status=status(), receipt_handle=request.receipt_handle
        )

    def forward(self, request: Any, account: Account, metadata: Mapping[str, str]) -> Any:
        """``ForwardMessageToDeadLetterQueue``: the received message goes to ``%DLQ%<group>``
        now (a FIFO push consumer's last failed attempt), and is settled."""
        peer = self._holder(request, account)
        if peer is not None:
            return self._peers.pass_on("ForwardMessageToDeadLetterQueue", request, peer, metadata)
        consumer, held = self._held_message(request)
        held.message_id = request.message_id
        reason = (
            f"forwarded by the client after {request.delivery_attempt} deliveries "
            f"(max attempts {request.max_delivery_attempts})"
        )
        try:
            consumer.forward_to_dead_letter_queue(held, reason)
        except ClientException as exc:
            raise ProxyError(_code_of(exc, Code.INVALID_RECEIPT_HANDLE), str(exc)) from exc
        return service.ForwardMessageToDeadLetterQueueResponse(status=status())

    def _holder(self, request: Any, account: Account) -> Address | None:
        """The other proxy that holds the message of ``request.receipt_handle``; None when this
        one does. The caller must be allowed to consume the request's topic in its group."""
        group = resource_name(request.group, "consumer group")
        account.require(Perm.SUB, topic=resource_name(request.topic), group=group)
        return self._peers.other(split(request.receipt_handle)[1])

    def _held_message(self, request: Any) -> tuple[SimpleConsumer, Message]:
        """The group's consumer here, and the message of ``request.receipt_handle``."""
        consumer = self._held(resource_name(request.group, "consumer group"))
        held = Message()
        held.receipt_handle = split(request.receipt_handle)[0]
        return consumer, held

    def close(self) -> None:
        """Leave every group. The proxy serves no more calls by now, so no ack can come: the
        messages its clients hold go back to their groups at once."""
        with self._lock:
            consumers, self._consumers = list(self._consumers.values()), {}
        for consumer in consumers:
            try:
                consumer.shutdown(wait_for_held=False)
            except ClientException as exc:
                log.warning("consumer group %s did not shut down cleanly: %s", consumer, exc)


def _code_of(exc: ClientException, default: int = Code.BAD_REQUEST) -> int:
    code = getattr(exc, "code", None)
    return int(code) if isinstance(code, int) and code > 0 else default
