"""``Producer``: normal, oneway and orderly sends on Kafka, as ``rocketmq.client.Producer``.

Reproduces ``rocketmq.client.Producer`` of rocketmq-client-python 2.0: its constructor, setters
(:class:`ProducerSettings`, shared with ``TransactionMQProducer``), ``start``/``shutdown`` and
the three sends, whose rules live in the send core (:mod:`adapter.producer.sender`).
Extensions the 2.0 client lacks, on ``Producer`` only: ``send_batch``
(:mod:`adapter.producer.batch_sender`) and ``send_async`` (:mod:`adapter.producer.async_sends`).
``start()`` does no network I/O, as RocketMQ's client starts without reaching its name
server: an unreachable Kafka shows at the first send, as ``ProducerSendSyncFailed`` naming the
address.

Known gaps: see :mod:`adapter.producer.sender`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import KafkaException

from adapter import naming
from adapter.client_settings import ClientSettings
from adapter.config import KafkaSettings, delay_levels_from_env, fast_commit_from_env
from adapter.exceptions import (
    AdapterError,
    ProducerException,
    ProducerSendAsyncFailed,
    ProducerSendOnewayFailed,
    ProducerSendOrderlyFailed,
    ProducerSendSyncFailed,
    ProducerStartFailed,
)
from adapter.message import Message
from adapter.producer.async_sends import AsyncSends, SendCallback, split
from adapter.producer.batch_sender import BatchSender
from adapter.producer.config import ProducerConfig
from adapter.producer.sender import Sender, SendResult, SendStatus

__all__ = ["Producer", "ProducerBase", "SendResult", "SendStatus"]

log = logging.getLogger(__name__)


class ProducerBase(ClientSettings):
    """What ``Producer`` and ``TransactionMQProducer`` share, as in the original class tree:
    the setters, the config they make at ``start()``, and the three sends, which the
    :class:`Sender` the producer holds does."""

    _timeout_ms: int | None = None
    _compress_level: int | None = None
    _max_message_size: int | None = None
    _sender: Sender | None = None
    _kafka: KafkaSettings | None = None
    """Kafka settings given in code (the 5.x client's); otherwise the name server address and
    the ``RMQ_ADAPTER_*`` environment are read at ``start()``."""

    def send_sync(self, msg: Message) -> SendResult:
        return self._started(ProducerSendSyncFailed).send_sync(msg, ProducerSendSyncFailed)

    def send_orderly_with_sharding_key(self, msg: Message, sharding_key: str) -> SendResult:
        error = ProducerSendOrderlyFailed
        sender = self._started(error)
        queue = sender.queue_for(msg, sharding_key, error)
        return sender.send_sync(msg, error, partition=queue, key=sharding_key)

    def send_oneway(self, msg: Message) -> None:
        self._started(ProducerSendOnewayFailed).send_oneway(msg, ProducerSendOnewayFailed)

    @property
    def oneway_failures(self) -> int:
        """Oneway sends Kafka did not acknowledge (adapter extension)."""
        return self._sender.oneway_failures if self._sender is not None else 0

    def flush(self, timeout: float | None = None) -> int:
        """Wait for outstanding oneway sends; returns how many are still undelivered."""
        sender = self._sender
        if sender is None:
            return 0
        return int(sender.client.flush(sender.timeout_s if timeout is None else timeout))

    def _started(self, error: type[ProducerException]) -> Sender:
        sender = self._sender
        if sender is None:
            raise error(f"producer {self._group!r} is not started; call start() first")
        return sender

    def set_timeout(self, timeout: int) -> None:
        """Send timeout in milliseconds (RocketMQ's sendMsgTimeout, default 3000)."""
        self._timeout_ms = timeout

    def set_compress_level(self, level: int) -> None:
        """zlib level 0..9; sends are then gzip-compressed by Kafka at that level."""
        self._compress_level = level

    def set_max_message_size(self, max_size: int) -> None:
        """Largest body accepted, in bytes (default 4 MiB)."""
        self._max_message_size = max_size

    def _producer_config(self) -> ProducerConfig:
        """The frozen config of this producer; ``ProducerStartFailed`` when it is not valid."""
        try:
            naming.validate_group(self._group)
            kwargs: dict[str, Any] = {}
            if self._timeout_ms is not None:
                kwargs["send_timeout_ms"] = self._timeout_ms
            if self._max_message_size is not None:
                kwargs["max_message_size"] = self._max_message_size
            if self._compress_level is not None:
                kwargs["compress_level"] = self._compress_level
            kafka = self._kafka or KafkaSettings.from_env(self._bootstrap)
            return ProducerConfig(
                kafka,
                self._group,
                self._instance_name,
                delay_levels=delay_levels_from_env(),
                fast_commit=fast_commit_from_env(),
                **kwargs,
            )
        except AdapterError as exc:
            raise ProducerStartFailed(f"producer {self._group!r} could not start: {exc}") from exc


class Producer(ProducerBase):
    """Drop-in for ``rocketmq.client.Producer``; Kafka bootstrap servers stand for name servers."""

    def __init__(
        self,
        group_id: str,
        orderly: bool = False,
        timeout: int | None = None,
        compress_level: int | None = None,
        max_message_size: int | None = None,
    ) -> None:
        self._group = group_id
        self._orderly = orderly
        self._timeout_ms = timeout
        self._compress_level = compress_level
        self._max_message_size = max_message_size
        self._sender: Sender | None = None
        self._batches: BatchSender | None = None
        self._async: AsyncSends | None = None

    def send_batch(self, messages: Sequence[Message]) -> list[SendResult]:
        """Send ``messages`` as one batch (an extension: the Java client's
        ``send(Collection<Message>)``; the 2.0 Python client has none): one ``SendResult`` per
        message, in order (``msg_id`` its ``UNIQ_KEY``, kept for a retry), or
        ``ProducerSendSyncFailed`` and none of them visible to read_committed readers.

        RocketMQ's batch rules are checked before anything is sent: one topic, no delay (nor
        delivery time), no retry topic, no transactional message, each body within the max
        message size and the whole batch too (:mod:`adapter.producer.batch`). The batch is one
        Kafka transaction, on a transactional producer made at the first batch, with the
        ``transactional.id`` ``rmq-adapter-batch-<group>@<instance>-<random>``
        (:mod:`adapter.producer.batch_sender`)."""
        sender = self._started(ProducerSendSyncFailed)
        if self._batches is None:
            self._batches = BatchSender(sender)
        return self._batches.send(messages, ProducerSendSyncFailed)

    def send_async(
        self,
        msg: Message,
        callback: SendCallback,
        exception_callback: Callable[[BaseException], object] | None = None,
    ) -> None:
        """Send ``msg`` and return at once (an extension: rocketmq-client-python#130 removed
        it; the Java client's ``send(msg, SendCallback)``). ``callback`` is called once, with
        the ``SendResult`` or with the exception (``ProducerSendAsyncFailed``); given an
        ``exception_callback`` (the removed method's third argument), ``callback`` gets the
        result and ``exception_callback`` the exception. Callbacks run on the
        producer's callback thread ``async-sends-<group>``, never the caller's; a callback
        that raises is logged, not propagated. A delayed message goes to
        ``SCHEDULE_TOPIC_XXXX`` as ``send_sync`` sends it. ``ProducerSendAsyncFailed`` is
        raised only when the producer is not started (:mod:`adapter.producer.async_sends`)."""
        sender = self._started(ProducerSendAsyncFailed)
        if self._async is None:
            self._async = AsyncSends(sender)
        if exception_callback is not None:
            callback = split(callback, exception_callback)
        self._async.send(msg, callback)

    def start(self) -> None:
        if self._sender is not None:
            return
        config = self._producer_config()
        try:
            self._sender = Sender(config)
        except KafkaException as exc:
            raise ProducerStartFailed(f"producer {self._group!r} could not start: {exc}") from exc

    def shutdown(self) -> None:
        """Call back every async send, close the batch producer, deliver what is queued."""
        batches, self._batches = self._batches, None
        if batches is not None:
            batches.close()
        sends, self._async = self._async, None
        if sends is not None and (left := sends.close()):
            log.error(
                "producer %s shut down with %d async sends not called back", self._group, left
            )
        sender, self._sender = self._sender, None
        if sender is not None:
            remaining = sender.close()
            if remaining:
                log.error(
                    "producer %s shut down with %d messages undelivered", self._group, remaining
                )
