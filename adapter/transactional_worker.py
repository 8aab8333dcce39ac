"""What the forwarder and the coordinator share: a worker that reads a group and commits by turns,
each turn one Kafka transaction.

Reproduces the lifecycle of RocketMQ's broker services (``ScheduleMessageService``,
``TransactionalMessageCheckService``): they run until shutdown and survive a failed round. Here
a turn that fails is logged and the next turn follows a second later; only a worker fenced by
another instance of its transactional id stops. Also shared: retrying the transactional calls
librdkafka marks retriable, aborting (or, when the abort fails, replacing the producer), a
produce that waits for room in the local queue, and the headers of a parked record.

Known gaps: none.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer

from adapter.exceptions import AdapterError


class Fenced(AdapterError):
    """Another worker took over this worker's transactional id."""


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def produce(producer: Producer, topic: str, value: bytes | None, **kwargs: Any) -> None:
    """``producer.produce``, serving delivery reports while the local queue is full."""
    while True:
        try:
            producer.produce(topic, value, **kwargs)
            return
        except BufferError:
            producer.poll(0.05)


def parked_headers(reason: str, topic: str, partition: int, offset: int) -> list[tuple[str, bytes]]:
    """The headers of a record parked in the poison topic: why, and where it came from."""
    return [
        ("reason", reason.encode()),
        ("source.topic", topic.encode()),
        ("source.partition", str(partition).encode()),
        ("source.offset", str(offset).encode()),
    ]


class TransactionalWorker:
    """``run()`` until ``stop()``; or drive it with ``start()``, ``run_once()``, ``close()``.

    Subclasses set ``name`` and ``log``, create their clients in ``start()`` (the producer with
    :meth:`_new_producer`) and do one turn in ``run_once()``."""

    name: ClassVar[str]
    log: ClassVar[logging.Logger]

    def __init__(
        self,
        worker_id: str,
        kafka_transaction_timeout_ms: int,
        producer_settings: Callable[[], dict[str, Any]],
    ) -> None:
        self.worker_id = worker_id
        self._timeout = kafka_transaction_timeout_ms / 1000
        self._producer_settings = producer_settings
        self._stopping = threading.Event()
        self._consumer: Consumer | None = None
        self._producer: Producer | None = None

    def start(self) -> None:
        raise NotImplementedError

    def run_once(self) -> int:
        raise NotImplementedError

    def run(self) -> None:
        """Work until ``stop()``. A failed turn is logged and the next one follows in a
        second; only a fenced worker stops."""
        self.start()
        try:
            while not self._stopping.is_set():
                try:
                    self.run_once()
                except Fenced:
                    raise
                except (KafkaException, AdapterError):
                    self.log.exception("%s turn failed; going on in 1 s", self.name)
                    self._stopping.wait(1.0)
        finally:
            self.close()

    def stop(self) -> None:
        """Finish the turn in hand, commit it, and leave the group (``run`` returns)."""
        self._stopping.set()

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()
        producer, self._producer = self._producer, None
        if producer is not None:
            producer.flush(5)
        self.log.info("%s %s stopped", self.name, self.worker_id)

    # -- transactions -----------------------------------------------------------------------

    def _clients(self) -> tuple[Producer, Consumer]:
        if self._producer is None or self._consumer is None:
            raise RuntimeError(f"the {self.name} is not started: call start() first")
        return self._producer, self._consumer

    def _timeout_s(self) -> float:
        return self._timeout

    def _retrying(self, operation: Callable[[], None]) -> None:
        """Run a transactional call again while it fails with a retriable error (a coordinator
        loading or moving), as librdkafka asks; up to the transaction timeout."""
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                operation()
                return
            except KafkaException as exc:
                error: KafkaError = exc.args[0]
                if error.txn_requires_abort() or not error.retriable():
                    raise
                if time.monotonic() > deadline:
                    raise
                self.log.info("transactional call will be retried: %s", error.str())
                time.sleep(0.1)

    def _new_producer(self) -> Producer:
        """A transactional producer; ``init_transactions`` fences any earlier instance of this
        worker id and aborts its open transaction."""
        producer = Producer(self._producer_settings(), logger=self.log)
        deadline = time.monotonic() + self._timeout + 60
        while True:
            try:
                producer.init_transactions(5.0)
                return producer
            except KafkaException as exc:
                if not exc.args[0].retriable() or time.monotonic() > deadline:
                    raise
                if self._stopping.is_set():
                    raise AdapterError("stopped while initialising transactions") from exc
                self.log.info("init_transactions will be retried: %s", exc.args[0].str())

    def _fenced_if_fatal(self, error: KafkaError | None) -> None:
        if error is not None and error.fatal():
            raise Fenced(
                f"worker {self.worker_id} can no longer commit ({error.str()}); "
                "another worker with the same id took over"
            )

    def _abort(self) -> None:
        """Abort the open transaction; when the abort itself fails, start a new producer."""
        producer, _ = self._clients()
        try:
            self._retrying(lambda: producer.abort_transaction(self._timeout))
        except KafkaException as exc:
            if exc.args[0].fatal():
                raise Fenced(str(exc)) from exc
            self.log.warning("abort failed (%s); starting a new producer", exc)
            self._producer = None
            producer.purge()
            producer.flush(0)
            self._producer = self._new_producer()
