"""Writing Kafka the way every part of the adapter does, written once.

Not a RocketMQ behaviour: RocketMQ's clients wait on request futures. Here:

- :func:`produce`: produce while the local queue is full, within a deadline, then
  :class:`~adapter.exceptions.LocalQueueFull`;
- :func:`produce_and_ack`: produce one record and wait for its acknowledgement (:class:`Ack`);
- :func:`produce_and_await`: the same for an asyncio task, without blocking its loop;
- :func:`produce_kwargs`: the keyword arguments of a produce, partition and key when given.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Sequence
from typing import Any

import tenacity
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka import Message as KafkaRecord

from adapter import naming
from adapter.clock import SYSTEM_CLOCK
from adapter.exceptions import DeliveryError, LocalQueueFull


def produce_kwargs(
    headers: Sequence[tuple[str, bytes]], partition: int | None, key: bytes | None
) -> dict[str, Any]:
    """The keyword arguments of ``produce`` beyond topic and value (partition and key only
    when given: librdkafka then chooses)."""
    kwargs: dict[str, Any] = {"headers": headers}
    if partition is not None:
        kwargs["partition"] = partition
    if key is not None:
        kwargs["key"] = key
    return kwargs


def produce(
    producer: Producer, topic: str, value: bytes | None, *, timeout_s: float, **kwargs: Any
) -> None:
    """``producer.produce``; while the local queue is full, serve delivery reports (which make
    room) for up to ``timeout_s``, then :class:`LocalQueueFull`."""
    try:
        producer.produce(topic, value, **kwargs)  # the usual case, without the retry machinery
        return
    except BufferError:
        pass
    try:
        for attempt in tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(BufferError),
            wait=tenacity.wait_fixed(0.05),
            stop=tenacity.stop_after_delay(timeout_s),
            sleep=lambda seconds: _serve_reports(producer, seconds),
        ):
            with attempt:
                producer.produce(topic, value, **kwargs)
    except tenacity.RetryError as exc:
        raise LocalQueueFull(
            f"the local send queue stayed full for {timeout_s:g} s (sending to "
            f"{naming.decode(topic)})",
            topic=topic,
        ) from exc


def _serve_reports(producer: Producer, seconds: float) -> None:
    producer.poll(seconds)


class Ack:
    """One record's delivery report, as the ``on_delivery`` callback of its produce."""

    __slots__ = ("error", "partition", "offset", "done")

    def __init__(self) -> None:
        self.error: KafkaError | None = None
        self.partition = -1
        self.offset = -1
        self.done = threading.Event()

    def __call__(self, error: KafkaError | None, record: KafkaRecord) -> None:
        self.error = error
        if error is None:
            self.partition = record.partition() or 0
            self.offset = record.offset() or 0
        self.done.set()


def produce_and_ack(
    producer: Producer,
    topic: str,
    value: bytes | None,
    *,
    timeout_s: float,
    reports_served: bool = False,
    flush: bool = True,
    what: str = "",
    **kwargs: Any,
) -> Ack:
    """Produce one record and wait for Kafka's acknowledgement, up to ``timeout_s``.

    ``reports_served``: another thread polls ``producer`` and will run this record's report.
    Otherwise this call serves the reports itself: with ``flush``, it flushes, which also
    sends at once, ignoring ``linger.ms``, but waits for every record queued before it too;
    without, it polls until this record's report has come (give the producer no linger).

    Raises:
        DeliveryError: no acknowledgement in time, or Kafka refused the record
            (``kafka_error`` holds the cause). ``what`` names the record in the message.
    """
    ack = Ack()
    what = what or f"a record for {naming.decode(topic)}"
    produce(producer, topic, value, timeout_s=timeout_s, on_delivery=ack, **kwargs)
    if reports_served:
        ack.done.wait(timeout_s + 1.0)
    elif not flush:
        _serve_until(producer, ack, timeout_s + 1.0)
    else:
        try:
            producer.flush(timeout_s + 1.0)
        except SystemError as exc:
            # confluent-kafka raises a fatal error (a fenced transactional producer) out of
            # flush() as a SystemError whose cause is the KafkaException: raise that instead.
            if isinstance(exc.__cause__, KafkaException):
                raise exc.__cause__ from None
            raise
    return _checked(ack, topic, timeout_s, what)


async def produce_and_await(
    producer: Producer,
    topic: str,
    value: bytes | None,
    *,
    timeout_s: float,
    what: str = "",
    **kwargs: Any,
) -> Ack:
    """:func:`produce_and_ack` for an asyncio task, whose loop it never blocks: another thread
    must serve ``producer``'s reports; each hands its record's to the loop. A full local queue
    is waited out on the loop's default executor. Raises as :func:`produce_and_ack` does."""
    loop = asyncio.get_running_loop()
    ack = _LoopAck(loop)
    what = what or f"a record for {naming.decode(topic)}"
    try:
        producer.produce(topic, value, on_delivery=ack, **kwargs)  # the usual case
    except BufferError:
        wait = functools.partial(
            produce, producer, topic, value, timeout_s=timeout_s, on_delivery=ack, **kwargs
        )
        await loop.run_in_executor(None, wait)
    with contextlib.suppress(TimeoutError):  # told as a DeliveryError below
        await asyncio.wait_for(ack.settled, timeout_s + 1.0)
    return _checked(ack, topic, timeout_s, what)


def _checked(ack: Ack, topic: str, timeout_s: float, what: str) -> Ack:
    """``ack`` once it has come and Kafka took the record; :class:`DeliveryError` otherwise."""
    if not ack.done.is_set():
        raise DeliveryError(f"no acknowledgement within {timeout_s:g} s for {what}", topic=topic)
    if ack.error is not None:
        why = ack.error.str()
        if ack.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            why += f" (the principal is not authorised to WRITE topic {naming.decode(topic)})"
        raise DeliveryError(f"Kafka refused {what}: {why}", topic=topic, kafka_error=ack.error)
    return ack


def _serve_until(producer: Producer, ack: Ack, timeout_s: float) -> None:
    """Serve ``producer``'s delivery reports (its others' too) until ``ack`` has come, up to
    ``timeout_s``: records queued before it, or stuck on another partition, are not waited
    for."""
    deadline = SYSTEM_CLOCK.monotonic() + timeout_s
    while not ack.done.is_set():
        remaining = deadline - SYSTEM_CLOCK.monotonic()
        if remaining <= 0:
            return
        producer.poll(min(remaining, 0.1))


class _LoopAck(Ack):
    """An :class:`Ack` an event loop awaits: the reporting thread also settles a future of
    the loop (one hand-off, where a worker thread waiting on the event would cost two)."""

    __slots__ = ("_loop", "settled")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._loop = loop
        self.settled: asyncio.Future[None] = loop.create_future()

    def __call__(self, error: KafkaError | None, record: KafkaRecord) -> None:
        super().__call__(error, record)
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits any more
            self._loop.call_soon_threadsafe(self._settle)

    def _settle(self) -> None:
        if not self.settled.done():
            self.settled.set_result(None)
