"""``Producer.send_async``'s shell: a send that returns at once and calls back once.

Not in rocketmq-client-python 2.0, which removed its async send (rocketmq-client-python#130);
the Java client's ``send(msg, SendCallback)``. ``callback`` gets the message's
:class:`SendResult` when Kafka has acknowledged it, or the exception
(:class:`~adapter.exceptions.ProducerSendAsyncFailed`, with the cause chained) when the send
failed, a message the send would refuse included: like the Java client, which hands those to
``onException`` too, nothing is raised to the caller. Given an ``exception_callback`` as well,
as the 2.0 client had it before #130, ``callback`` gets the results and ``exception_callback``
the exceptions (:func:`split`). Each callback is called once, on the
producer's callback thread (``async-sends-<group>``), never on the caller's, one callback at a
time, in the order the outcomes came. A callback that raises is logged (with the message id)
and the next ones still come. A delayed message is parked on ``SCHEDULE_TOPIC_XXXX``, as
``send_sync`` parks it.

Known gaps: while async sends are in flight, a ``send_sync`` of the same producer whose report
the callback thread served waits up to 0.1 s longer (50 ``send_sync`` took 3.1 s instead of 0.75
s when the callback thread polled all the time; it polls only while async sends are pending).
``send_async`` waits while librdkafka's local queue is full (up to the send timeout),
as every send here does. A slow callback holds back the callbacks after it.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from confluent_kafka import KafkaError
from confluent_kafka import Message as KafkaRecord

from adapter.exceptions import DeliveryError, ProducerException, ProducerSendAsyncFailed
from adapter.message import Message
from adapter.producer.sender import Sender, SendResult, SendStatus

log = logging.getLogger(__name__)

SendCallback = Callable[[SendResult | BaseException], object]
Outcome = tuple[SendCallback, str, SendResult | BaseException]

POLL_S = 0.05


def split(
    on_success: Callable[[SendResult], object], on_exception: Callable[[BaseException], object]
) -> SendCallback:
    """One callback of the outcome from the two of rocketmq-client-python before #130
    (``send_async(msg, success_callback, exception_callback)``)."""

    def callback(outcome: SendResult | BaseException) -> None:
        if isinstance(outcome, BaseException):
            on_exception(outcome)
        else:
            on_success(outcome)

    return callback


class AsyncSends:
    """The async sends of one :class:`Sender`, and the thread that calls back."""

    def __init__(self, sender: Sender) -> None:
        self._sender = sender
        self._outcomes: queue.SimpleQueue[Outcome] = queue.SimpleQueue()
        self._pending = 0
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._close_by = float("inf")

    @property
    def pending(self) -> int:
        """Sends whose callback has not been called yet."""
        return self._pending

    def send(self, msg: Message, callback: SendCallback) -> None:
        sender = self._sender
        error: type[ProducerException] = ProducerSendAsyncFailed
        msg_id = msg.unique_key()
        self._started()
        try:
            record = sender.record(msg, msg_id, error)
            sender.produce_oneway(record, error, on_delivery=self._on_delivery(callback, msg_id))
        except ProducerException as exc:
            self._outcomes.put((callback, msg_id, exc))

    def _started(self) -> None:
        with self._lock:
            self._pending += 1
            self._wake.set()
            if self._thread is None:
                name = f"async-sends-{self._sender.config.group}"
                self._thread = threading.Thread(target=self._run, name=name, daemon=True)
                self._thread.start()

    def _on_delivery(
        self, callback: SendCallback, msg_id: str
    ) -> Callable[[KafkaError | None, KafkaRecord], None]:
        """The delivery report of one send: run by whichever thread polls the producer, so it
        only queues the outcome for the callback thread."""
        sender = self._sender

        def delivered(err: KafkaError | None, record: KafkaRecord) -> None:
            outcome: SendResult | BaseException
            if err is None:
                outcome = SendResult(SendStatus.OK, msg_id, record.offset() or 0)
            else:
                cause = DeliveryError(f"Kafka refused {msg_id}: {err.str()}", kafka_error=err)
                outcome = ProducerSendAsyncFailed(sender.with_address(cause))
                outcome.__cause__ = cause
            self._outcomes.put((callback, msg_id, outcome))

        return delivered

    def _run(self) -> None:
        clock = self._sender.clock
        while not (self._closing.is_set() and self._pending == 0) and (
            clock.monotonic() < self._close_by
        ):
            if not self._pending:
                # Nothing in flight: leave the reports to the sends that wait for them (a
                # report this thread takes keeps a waiting send_sync polling for 0.1 s more).
                self._wake.wait(POLL_S)
                self._wake.clear()
                continue
            self._sender.client.poll(POLL_S)
            while True:
                try:
                    callback, msg_id, outcome = self._outcomes.get_nowait()
                except queue.Empty:
                    break
                self._call(callback, msg_id, outcome)

    def _call(
        self, callback: SendCallback, msg_id: str, outcome: SendResult | BaseException
    ) -> None:
        try:
            callback(outcome)
        except Exception:
            log.exception("the send_async callback of message %s raised", msg_id)
        finally:
            with self._lock:
                self._pending -= 1

    def close(self) -> int:
        """Call back every send (each is reported within the send timeout); how many were not."""
        wait_s = self._sender.timeout_s + 1.0
        self._close_by = self._sender.clock.monotonic() + wait_s
        self._closing.set()
        thread = self._thread
        if thread is not None:
            thread.join(wait_s + 1.0)
        return self._pending
