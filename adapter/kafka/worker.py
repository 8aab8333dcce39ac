"""The exactly-once worker: turns of work, each one Kafka transaction, and a producer that heals.

Reproduces the lifecycle of RocketMQ's broker services (``ScheduleMessageService``,
``TransactionalMessageCheckService``): they run until shutdown and survive a failed round.
Two pieces, composed by the schedule forwarder and the transaction coordinator:

- :class:`Transactor` owns the worker's transactional producer. Every blocking call runs under a
  watchdog with a deadline that holds even when librdkafka overstays its own timeout (seen:
  ``send_offsets_to_transaction`` stuck for good after a broker restart). A producer that
  overstays, or whose abort fails, is dropped; the next turn starts a new one with the same
  transactional id, whose ``init_transactions`` fences the old one and aborts its transaction.
- :class:`ExactlyOnceWorker` runs turns until stopped (or, in burst mode, until idle). A failed
  turn is logged once per change of failure (then summed up every 30 s) and retried after a
  second; only a fenced worker, or one Kafka refuses for good, stops, with a clear reason.

Known gaps: a call abandoned by the watchdog keeps its thread until librdkafka returns.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

import tenacity
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka import Message as KafkaRecord
from prometheus_client import CollectorRegistry

from adapter.clock import SYSTEM_CLOCK, Clock
from adapter.config import WorkerConfig
from adapter.exceptions import AdapterError
from adapter.kafka import clients, io
from adapter.logs import shape

T = TypeVar("T")
C = TypeVar("C", bound=WorkerConfig)

WATCHDOG_GRACE_S = 5.0
"""How long past its own timeout a librdkafka call may take before it counts as stuck."""
FAILURE_SUMMARY_S = 30.0


class Fenced(AdapterError):
    """Another worker took over this worker's transactional id, or Kafka refuses it for good."""

    kind = "fenced"


class Stuck(AdapterError):
    """A librdkafka call did not return within its deadline; its producer is abandoned."""

    kind = "stuck"


def parked_headers(reason: str, topic: str, partition: int, offset: int) -> list[tuple[str, bytes]]:
    """The headers of a record parked in the poison topic: why, and where it came from."""
    return [
        ("reason", reason.encode()),
        ("source.topic", topic.encode()),
        ("source.partition", str(partition).encode()),
        ("source.offset", str(offset).encode()),
    ]


def within(deadline_s: float, what: str, call: Callable[[], T]) -> T:
    """``call()`` on a helper thread; :class:`Stuck` if it has not returned in ``deadline_s``."""
    outcome: list[Any] = []
    done = threading.Event()

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            outcome.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=run, name=f"watchdog:{what}", daemon=True).start()
    if not done.wait(deadline_s):
        raise Stuck(f"{what} did not return within {deadline_s:g} s")
    ok, value = outcome[0]
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


def _retriable(exc: BaseException) -> bool:
    if not isinstance(exc, KafkaException):
        return False
    error: KafkaError = exc.args[0]
    return error.retriable() and not error.txn_requires_abort()


@dataclass(eq=False)
class Transactor:
    """A worker's transactional producer, by composition: begin, produce, commit with the
    consumed positions, abort; a new producer whenever the old one cannot go on."""

    settings: Callable[[], dict[str, Any]]
    """The producer's librdkafka settings (``transactional.id`` included)."""
    timeout_s: float
    log: logging.Logger
    stopping: threading.Event
    in_transaction: bool = False
    _producer: Producer | None = None

    @property
    def producer(self) -> Producer:
        """The current producer, initialised (fencing earlier instances of this worker id)."""
        if self._producer is None:
            self._producer = self._new_producer()
        return self._producer

    def _new_producer(self) -> Producer:
        producer = clients.producer(self.settings())

        def init() -> None:
            if self.stopping.is_set():
                raise AdapterError("stopped while initialising transactions")
            self.call("init_transactions", lambda: producer.init_transactions(5.0), 5.0)

        try:
            tenacity.Retrying(
                retry=tenacity.retry_if_exception(_retriable),
                wait=tenacity.wait_exponential(multiplier=0.2, max=2.0),
                stop=tenacity.stop_after_delay(self.timeout_s),
                reraise=True,
            )(init)
        except KafkaException as exc:
            self._fenced_if_fatal(exc.args[0])
            raise
        return producer

    def call(self, what: str, operation: Callable[[], T], timeout_s: float | None = None) -> T:
        """``operation()`` under the watchdog: its own timeout plus a grace period."""
        return within((timeout_s or self.timeout_s) + WATCHDOG_GRACE_S, what, operation)

    def _retrying(self, what: str, operation: Callable[[], None]) -> None:
        """Run a transactional call again while it fails with a retriable error (a coordinator
        loading or moving), as librdkafka asks; up to the transaction timeout."""
        try:
            io.keep_trying(
                lambda: self.call(what, operation),
                when=_retriable,
                every_s=0.1,
                for_s=self.timeout_s,
            )
        except KafkaException as exc:
            self._fenced_if_fatal(exc.args[0])
            raise

    def begin(self) -> Producer:
        producer = self.producer
        producer.begin_transaction()
        self.in_transaction = True
        return producer

    def produce(self, topic: str, value: bytes | None, **kwargs: Any) -> None:
        io.produce(self.producer, topic, value, timeout_s=self.timeout_s, **kwargs)

    def commit(
        self, positions: list[TopicPartition] | None = None, consumer: Consumer | None = None
    ) -> None:
        """Commit the open transaction, with the consumer's ``positions`` in it if given."""
        producer, timeout = self.producer, self.timeout_s
        if positions and consumer is not None:
            metadata = consumer.consumer_group_metadata()
            self._retrying(
                "send_offsets_to_transaction",
                lambda: producer.send_offsets_to_transaction(positions, metadata, timeout),
            )
        self._retrying("commit_transaction", lambda: producer.commit_transaction(timeout))
        self.in_transaction = False

    def fail(self, cause: BaseException) -> None:
        """The open transaction cannot be committed: abort it; drop a stuck producer unasked."""
        if isinstance(cause, KafkaException):
            self._fenced_if_fatal(cause.args[0])
        if isinstance(cause, Stuck):
            self.log.warning("%s; a new producer will take over", cause)
            self.drop()
        else:
            self.abort()

    def abort(self) -> None:
        """Abort the open transaction; when the abort fails, drop the producer (the next one
        fences it, which aborts the transaction on the broker)."""
        if not self.in_transaction:
            return
        self.in_transaction = False
        producer, timeout = self._producer, self.timeout_s
        if producer is None:
            return
        try:
            self._retrying("abort_transaction", lambda: producer.abort_transaction(timeout))
        except (KafkaException, Stuck) as exc:
            self.log.warning("abort failed (%s); a new producer will take over", exc)
            self.drop()

    def drop(self) -> None:
        """Forget the producer without calling it (it may be stuck); the next turn starts a new
        one."""
        self._producer = None
        self.in_transaction = False

    def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            try:
                self.call("flush", lambda: producer.flush(5), 5)
            except Stuck as exc:
                self.log.warning("producer not closed cleanly: %s", exc)

    def _fenced_if_fatal(self, error: KafkaError | None) -> None:
        if error is not None and error.fatal():
            raise Fenced(
                f"this worker can no longer commit ({error.str()}); another worker with the "
                "same worker id took over, or Kafka refuses this transactional id"
            )


class FailureLog:
    """Logs a run of failed turns as state changes: the first failure of a kind, a summary
    every ``summary_s`` while it lasts, and the recovery (not one line per turn)."""

    def __init__(self, log: logging.Logger, clock: Clock, summary_s: float = FAILURE_SUMMARY_S):
        self._log = log
        self._clock = clock
        self._summary_s = summary_s
        self._since: float | None = None
        self._kind = ""
        self._count = 0
        self._last_summary = 0.0

    @property
    def failing(self) -> bool:
        return self._since is not None

    def failed(self, what: str, exc: BaseException) -> None:
        now = self._clock.monotonic()
        kind = shape(f"{type(exc).__name__}: {exc}")
        self._count += 1
        if self._since is None or kind != self._kind:
            if self._since is None:
                self._since = now
            self._kind = kind
            self._last_summary = now
            self._log.error("%s failed: %s; retrying every second", what, exc)
        elif now - self._last_summary >= self._summary_s:
            self._last_summary = now
            self._log.error(
                "%s still failing after %.0f s (%d failed turns): %s",
                what,
                now - self._since,
                self._count,
                exc,
            )

    def succeeded(self, what: str) -> None:
        if self._since is not None:
            self._log.warning(
                "%s works again after %.0f s (%d failed turns)",
                what,
                self._clock.monotonic() - self._since,
                self._count,
            )
        self._since, self._kind, self._count = None, "", 0


class ExactlyOnceWorker(ABC, Generic[C]):
    """``run()`` until ``stop()``; or ``run(burst=True)`` until idle; or drive it by hand with
    ``start()``, ``run_once()`` (or ``drain()``) and ``close()``."""

    name: ClassVar[str]
    log: ClassVar[logging.Logger]

    def __init__(
        self, config: C, registry: CollectorRegistry | None = None, clock: Clock = SYSTEM_CLOCK
    ) -> None:
        self.config = config
        self.registry = registry or CollectorRegistry()
        self.worker_id = config.worker_id
        self.bootstrap = config.kafka.bootstrap_servers
        self.clock = clock
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()
        self._consumer: Consumer | None = None
        self.tx = Transactor(
            config.producer,
            timeout_s=config.kafka_transaction_timeout_ms / 1000,
            log=self.log,
            stopping=self._stopping,
        )
        self.failures = FailureLog(self.log, clock)
        self.last_turn_at: float | None = None
        """Monotonic time the last turn ended, failed or not (the loop is alive)."""
        self.assigned_once = False
        """The group has given this worker its partitions (possibly none) at least once."""
        self.topics = io.PartitionCounts(
            lambda *a, **k: self.tx.producer.list_topics(*a, **k), timeout_s=10, clock=clock
        )
        """Partition counts of the topics the worker writes to."""
        self.setup()

    # -- what each worker does --------------------------------------------------------------

    @abstractmethod
    def setup(self) -> None:
        """The worker's own state and metrics (``__init__`` calls it; no I/O)."""

    @abstractmethod
    def start(self) -> None:
        """Check the topics, create the consumer and join the group (the producer starts with
        the first turn). ``run()`` calls it again after a failure, until it succeeds."""

    @abstractmethod
    def run_once(self) -> int:
        """One turn: read, decide, apply in one transaction; how many records it moved."""

    @abstractmethod
    def idle(self) -> bool:
        """Every owned partition is read to its end and nothing is due now."""

    # -- the loop ---------------------------------------------------------------------------

    def run(self, *, burst: bool = False) -> None:
        """Work until ``stop()`` (or, with ``burst``, until a turn moves nothing and the worker
        is idle). A failed turn is retried a second later; :class:`Fenced` ends the run."""
        self._stopped.clear()
        try:
            while not self._stopping.is_set():
                try:
                    if self._consumer is None:
                        self.start()
                    self.tx.producer  # noqa: B018 - the first turn fences earlier instances
                    moved = self.run_once()
                except Fenced:
                    raise
                except (KafkaException, AdapterError) as exc:
                    self.failures.failed(f"{self.name} turn (Kafka at {self.bootstrap})", exc)
                    self.last_turn_at = self.clock.monotonic()
                    self._stopping.wait(1.0)
                    continue
                self.last_turn_at = self.clock.monotonic()
                if self.failures.failing:
                    self.failures.succeeded(f"{self.name} turn (Kafka at {self.bootstrap})")
                if burst and moved == 0 and self.idle():
                    self.log.info("%s %s is idle; burst done", self.name, self.worker_id)
                    break
        finally:
            try:
                self.close()
            finally:
                self._stopped.set()

    def drain(self, timeout_s: float = 60.0) -> int:
        """Turns until one moves nothing and the worker is idle, starting it if needed; how
        many records moved. Failures raise. For tests that drive a worker turn by turn (with a
        :class:`~adapter.clock.ManualClock`), and for ``run(burst=True)``."""
        if self._consumer is None:
            self.start()
        deadline = SYSTEM_CLOCK.monotonic() + timeout_s
        moved = 0
        while True:
            turn = self.run_once()
            moved += turn
            if turn == 0 and self.idle():
                return moved
            if SYSTEM_CLOCK.monotonic() > deadline:
                raise AdapterError(f"the {self.name} was not idle within {timeout_s:g} s")

    def stop(self, timeout: float | None = None) -> bool:
        """Stop, in this order: no new turn starts; the turn in hand finishes and commits its
        transaction; the consumer leaves the group (its partitions go to the other workers);
        the producer is flushed and closed. Returns whether ``run()`` ended within
        ``timeout`` seconds (``None``: do not wait)."""
        self._stopping.set()
        if timeout is None:
            return self._stopped.is_set()
        return self._stopped.wait(timeout)

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def close(self) -> None:
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                self.tx.call("consumer close", consumer.close, 10)
            except Stuck as exc:
                self.log.warning("consumer not closed cleanly: %s", exc)
        self.tx.close()
        self.log.info("%s %s stopped", self.name, self.worker_id)

    def usable(self, record: KafkaRecord) -> bool:
        """Whether a fetched record is a record: a fatal consumer error raises (the turn
        fails), another is logged and skipped."""
        error = record.error()
        if error is None:
            return True
        if error.fatal():
            raise KafkaException(error)
        self.log.warning("consumer error: %s", error)
        return False

    def consumer(self) -> Consumer:
        if self._consumer is None:
            raise AdapterError(f"the {self.name} is not started: call start() first")
        return self._consumer

    # -- health -----------------------------------------------------------------------------

    def alive(self, within_s: float) -> bool:
        """The loop ended a turn within the last ``within_s`` seconds."""
        last = self.last_turn_at
        return last is not None and self.clock.monotonic() - last <= within_s

    def ready(self) -> bool:
        """Kafka answers (the last turn did not fail) and the group has assigned partitions."""
        return self.assigned_once and not self.failures.failing


AnyWorker = ExactlyOnceWorker[Any]
