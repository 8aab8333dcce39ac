"""The exactly-once worker: turns of work, each one Kafka transaction, and a producer that heals.

Reproduces the lifecycle of RocketMQ's broker services (``ScheduleMessageService``,
``TransactionalMessageCheckService``): they run until shutdown and survive a failed round.
Two pieces, composed by the schedule forwarder and the transaction coordinator:

- :class:`~adapter.kafka.transactor.Transactor` owns the worker's transactional producer,
  under a watchdog, and replaces it when it cannot go on;
- :class:`ExactlyOnceWorker` runs turns until stopped (or, in burst mode, until idle). A failed
  turn is logged once per change of failure (then summed up every 30 s) and retried after a
  second; after 30 s of failed turns the consumer is replaced too, and rejoins the group with
  its partitions restored from the committed positions. It stops, with a clear reason, only
  when fenced, refused for good by Kafka, on topics that break the layout (no retry mends
  them), or on a :class:`~adapter.exceptions.Bug`.

Known gaps: a call abandoned by the watchdog keeps its thread until librdkafka returns.
"""

from __future__ import annotations

import logging
import threading
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Generic, TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka import Message as KafkaRecord
from prometheus_client import CollectorRegistry

from adapter.clock import SYSTEM_CLOCK, Clock
from adapter.exceptions import AdapterError, TopicLayoutError
from adapter.kafka import clients, metadata
from adapter.kafka.rereads import Rereads
from adapter.kafka.transactor import Fenced, Stuck, Transactor
from adapter.kafka.worker_config import WorkerConfig
from adapter.logs import RepeatLimiter, shape

C = TypeVar("C", bound=WorkerConfig)

FAILURE_SUMMARY_S = 30.0
READY_TURN_S = 5.0
"""A worker none of whose turns ended within this long is not ready (a turn waits at most
half a second for records when idle)."""
CONSUMER_RESET_S = 30.0
"""Seconds of failed turns after which a worker replaces its consumer."""

__all__ = ["AnyWorker", "ExactlyOnceWorker", "FailureLog", "Fenced", "Stuck", "parked_headers"]


def parked_headers(reason: str, topic: str, partition: int, offset: int) -> list[tuple[str, bytes]]:
    """The headers of a record parked in the poison topic: why, and where it came from."""
    return [
        ("reason", reason.encode()),
        ("source.topic", topic.encode()),
        ("source.partition", str(partition).encode()),
        ("source.offset", str(offset).encode()),
    ]


class FailureLog:
    """Logs a run of failed turns as state changes: the first failure, a summary every
    ``summary_s`` while it lasts (with the latest cause), and the recovery; not a line a turn."""

    def __init__(self, log: logging.Logger, clock: Clock, summary_s: float = FAILURE_SUMMARY_S):
        self._log = log
        self._clock = clock
        self._summary_s = summary_s
        self._since: float | None = None
        self._count = 0
        self._last_summary = 0.0

    @property
    def failing(self) -> bool:
        return self._since is not None

    @property
    def since(self) -> float | None:
        """Monotonic time the current run of failed turns began; ``None`` while turns work."""
        return self._since

    def failed(self, what: str, exc: BaseException) -> None:
        now = self._clock.monotonic()
        self._count += 1
        if self._since is None:
            self._since = self._last_summary = now
            self._log.error("%s failed: %s; retrying every second", what, exc)
        elif now - self._last_summary >= self._summary_s:
            self._last_summary = now
            self._log.error(
                "%s still failing after %.0f s (%d failed turns), now: %s",
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
        self._since, self._count = None, 0


class ExactlyOnceWorker(ABC, Generic[C]):
    """``run()`` until ``stop()``; or ``run(burst=True)`` until idle; or drive it by hand with
    ``start()``, ``run_once()`` (or ``drain()``) and ``close()``."""

    name: ClassVar[str]
    log: ClassVar[logging.Logger]
    group: ClassVar[str]
    """The consumer group the worker's partitions come from."""

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
        self._consumer_errors = RepeatLimiter(FAILURE_SUMMARY_S, clock.monotonic)
        self._consumer_dropped_at: float | None = None
        """Monotonic time the worker last replaced a failing consumer."""
        self.last_turn_at: float | None = None
        """Monotonic time the last turn ended, failed or not (the loop is alive)."""
        self._assigned_once = False
        self.rereads = Rereads(self.log)
        """Records the consumer delivered again (its position went back): noted, then reported
        once a turn."""
        self.topics = metadata.PartitionCounts(
            lambda *a, **k: self.tx.producer.list_topics(*a, **k), timeout_s=10, clock=clock
        )
        """Partition counts of the topics the worker writes to."""
        self.setup()

    # -- what each worker does --------------------------------------------------------------

    @abstractmethod
    def setup(self) -> None:
        """The worker's own state and metrics (``__init__`` calls it; no I/O)."""

    @abstractmethod
    def reads(self) -> list[str]:
        """The Kafka topics the worker's consumer subscribes to."""

    def prepare(self) -> None:
        """What must hold before the consumer joins the group (topics visible, schemas
        installed); ``start()`` calls it, and ``run()`` again after a failure."""

    def on_assigned(self, partitions: list[TopicPartition]) -> None:
        """The group gave the worker ``partitions`` (of every topic it reads)."""

    def on_dropped(self, partitions: list[TopicPartition], how: str) -> None:
        """``partitions`` are no longer the worker's: ``how`` is "revoked" (a rebalance),
        "lost" (the session expired) or "dropped" (the worker replaced its consumer). What is
        held for them goes; their next owner reads them again from the committed positions."""

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
        self.last_turn_at = self.clock.monotonic()  # alive from the start; turns refresh it
        try:
            while not self._stopping.is_set():
                try:
                    if self._consumer is None:
                        self.start()
                    self.tx.open()  # the first turn fences earlier instances
                    moved = self.run_once()
                except (Fenced, TopicLayoutError):
                    raise  # Kafka refuses this id for good; the topics break the layout
                except (KafkaException, AdapterError) as exc:
                    self.failures.failed(f"{self.name} turn (Kafka at {self.bootstrap})", exc)
                    self.last_turn_at = self.clock.monotonic()
                    self._distrust_a_failing_consumer()
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

    def start(self) -> None:
        """Prepare, then create the consumer and join the group (the producer starts with the
        first turn). ``run()`` calls it again after a failure, until it succeeds."""
        self.prepare()
        consumer = clients.consumer(self.config.consumer(self.group))
        consumer.subscribe(
            self.reads(),
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )
        self._consumer = consumer

    @property
    def assigned_once(self) -> bool:
        """The group has given this worker its partitions (possibly none) at least once."""
        return self._assigned_once

    # Rebalance callbacks come from librdkafka's poll on the worker's thread, but also from a
    # consumer it replaced while that one closes: only the current consumer's are obeyed.

    def _on_assign(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        if consumer is self._consumer:
            self.on_assigned(partitions)
            self._assigned_once = True

    def _on_revoke(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        if consumer is self._consumer:
            self.on_dropped(partitions, "revoked")

    def _on_lost(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        if consumer is self._consumer:
            self.on_dropped(partitions, "lost")

    def _distrust_a_failing_consumer(self) -> None:
        """After ``CONSUMER_RESET_S`` of failed turns the consumer is closed and the next turn
        starts a new one, which rejoins the group and restores its partitions from the
        committed positions, as a restarted process would. A consumer that went through a
        broker restart was seen to time out in ``committed()`` for minutes while a new one
        worked at once; the producer is likewise dropped after a timeout (``Transactor``)."""
        consumer, since = self._consumer, self.failures.since
        if consumer is None or since is None:
            return
        now = self.clock.monotonic()
        failing_for = now - max(since, self._consumer_dropped_at or since)
        if failing_for < CONSUMER_RESET_S:
            return
        self.log.info(
            "dropping the consumer after %.0f s of failed turns; a new one rejoins the group",
            failing_for,
        )
        self._consumer = None
        self._consumer_dropped_at = now
        self.on_dropped(list(consumer.assignment()), "dropped")
        try:
            self.tx.call("consumer close", consumer.close, 10)
        except (Stuck, KafkaException) as exc:
            self.log.info("the dropped consumer did not close cleanly: %s", exc)

    def settled_positions(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """The group's committed positions of ``partitions``, read once this worker's own last
        transaction is settled. A failed turn may leave it open (its offsets unstable, which
        a read_committed consumer's ``committed()`` waits on until it times out) or in doubt
        (a commit that timed out may still commit): starting the producer first, with its
        ``init_transactions``, finishes or aborts it."""
        consumer = self.consumer()
        self.tx.open()  # settles the worker's last transaction
        if not partitions:
            return []

        def committed() -> list[TopicPartition]:
            return self.tx.call(
                "committed", lambda: consumer.committed(partitions, timeout=self.tx.timeout_s)
            )

        try:
            return committed()
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._TIMED_OUT:
                raise
            # Still unstable after this worker's producer was initialised: a transactional
            # offset commit of its producer id that Kafka keeps pending with nothing to end it
            # (seen after a broker restart: every later read timed out, for minutes, through
            # new consumers and producers). An aborted transaction of the same producer id,
            # with offsets of the group in it, writes the marker that ends it.
            self.log.warning(
                "the group's committed positions stayed unstable for %g s (%s); ending what "
                "this worker's producer left pending with an aborted transaction",
                self.tx.timeout_s,
                exc.args[0].str(),
            )
        self.tx.end_pending_offsets(partitions, consumer)
        return committed()

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
        held = self._consumer_errors.admit(shape(error.str()))
        if held is not None:
            more = f" ({held} more like it in the last 30 s)" if held else ""
            self.log.warning("consumer error: %s%s", error.str(), more)
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
        """Kafka answers (the last turn did not fail, and one ended within ``READY_TURN_S``:
        a turn stuck on a Kafka that is gone fails only after its calls time out, 10 to 20 s
        later) and the group has assigned partitions."""
        return self.assigned_once and not self.failures.failing and self.alive(READY_TURN_S)


AnyWorker = ExactlyOnceWorker[Any]
