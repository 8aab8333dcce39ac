"""A worker's transactional producer, kept alive: every blocking call under a watchdog, and a
new producer whenever the old one cannot go on.

Not a RocketMQ behaviour: RocketMQ's broker writes its own commit log. The adapter's workers
commit each turn as one Kafka transaction through a :class:`Transactor`, composed into them.
Every blocking librdkafka call runs under :func:`within`, with a deadline that holds even when
librdkafka overstays its own timeout (seen: ``send_offsets_to_transaction`` stuck for good after
a broker restart). A producer that overstays, times out, or is fenced is dropped; the next turn
starts a new one with the same transactional id, whose ``init_transactions`` fences the old one
and settles its transaction on the broker: aborted, or committed when the commit request had
reached the coordinator before the client gave up. That outcome is not known to the worker, so a
producer dropped in a transaction leaves the transactor :attr:`Transactor.in_doubt` until the
worker has read its positions back from Kafka.

A producer whose ``init_transactions`` did not finish (Kafka away) is kept and its
initialisation resumed on the next turn, never replaced: librdkafka goes on initialising an
abandoned one in the background, and when it got its producer id late it fenced the producer
that had replaced it (seen in a rolling restart). A fence is never the end of a worker: the
coordinator fences a producer whose transaction outlived ``transaction.timeout.ms`` (a broker
away mid-turn), so does a late initialisation, and so does another live worker given the same
worker id by mistake. Each fence costs a new producer; fences again within a minute wait 1 s,
2 s, 4 s ... up to 30 s first and are logged as errors, naming the possible twin. Other fatal
errors twice within a minute (Kafka refusing the id for good) raise :class:`Fenced`.

Known gaps: a call abandoned by the watchdog keeps its thread until librdkafka returns.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import tenacity
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from adapter.clock import SYSTEM_CLOCK
from adapter.exceptions import AdapterError
from adapter.kafka import clients, writing
from adapter.kafka.retry import keep_trying

log = logging.getLogger(__name__)

T = TypeVar("T")

WATCHDOG_GRACE_S = 5.0
"""How long past its own timeout a librdkafka call may take before it counts as stuck."""
FENCED_AGAIN_S = 60.0
"""Fatal producer errors this close together count as repeated."""
FENCE_BACKOFF_MAX_S = 30.0
"""The longest wait before a new producer after repeated fences."""


class Fenced(AdapterError):
    """Kafka refuses this worker's transactional id for good (a fatal error, twice in a row)."""

    kind = "fenced"


class Stuck(AdapterError):
    """A librdkafka call did not return within its deadline; its producer is abandoned."""

    kind = "stuck"


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


def _dispose(producer: Producer) -> None:
    """Drop what a replaced producer still holds; a fenced or failed one may refuse, which
    changes nothing: its transaction is aborted by the broker or fenced already."""
    try:
        producer.purge()
        producer.flush(0)
    except KafkaException as exc:
        log.debug("a replaced producer refused to be flushed: %s", exc)


def _dispose_later(producer: Producer) -> None:
    """:func:`_dispose` on a thread of its own: the producer may be stuck."""
    threading.Thread(target=_dispose, args=(producer,), name="dispose", daemon=True).start()


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
    in_doubt: bool = False
    """A producer was dropped in a transaction (a commit timed out, a call stuck): it may have
    committed. The worker reads its committed positions again, then calls :meth:`settled`."""
    _producer: Producer | None = None
    _starting: tuple[Producer, clients.LibrdkafkaLog, dict[str, Any]] | None = None
    """A producer whose ``init_transactions`` has not finished yet: resumed, never replaced."""
    _last_fatal: float | None = None
    _fences: int = 0
    """Fences in a row, each within a minute of the one before."""
    _resume_at: float = 0.0
    """Monotonic time before which no new producer starts (after repeated fences)."""

    @property
    def producer(self) -> Producer:
        """The current producer, initialised (fencing earlier instances of this worker id)."""
        if self._producer is None:
            self._producer = self._new_producer()
        return self._producer

    def open(self) -> Producer:
        """Start the producer if there is none: its ``init_transactions`` fences earlier
        instances of this transactional id and ends their open transaction."""
        return self.producer

    def _new_producer(self) -> Producer:
        """A producer with its transactions initialised: the one still initialising, if any
        (see the module's docstring), else a new one once any wait after fences is over."""
        pause = self._resume_at - SYSTEM_CLOCK.monotonic()
        if pause > 0 and self._starting is None:
            self.stopping.wait(pause)
        if self._starting is None:
            conf = self.settings()
            log = clients.LibrdkafkaLog()
            self._starting = (clients.producer(conf, log), log, conf)
        producer, log, conf = self._starting

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
            error: KafkaError = exc.args[0]
            if not error.retriable():
                self._abandon_starting()
                self._on_fatal(error)
                raise
            producer.poll(0)  # serve the log lines that say why
            raise clients.unavailable(conf, log.last_error or error.str(), self.timeout_s) from exc
        except Stuck:
            self._abandon_starting()  # a second init_transactions would conflict with it
            raise
        self._starting = None
        return producer

    def _abandon_starting(self) -> None:
        starting, self._starting = self._starting, None
        if starting is not None:
            _dispose_later(starting[0])

    @property
    def started(self) -> bool:
        """Whether a producer is in use (False after :meth:`drop`, until the next one)."""
        return self._producer is not None

    def call(self, what: str, operation: Callable[[], T], timeout_s: float | None = None) -> T:
        """``operation()`` under the watchdog: its own timeout plus a grace period."""
        return within((timeout_s or self.timeout_s) + WATCHDOG_GRACE_S, what, operation)

    def _retrying(self, what: str, operation: Callable[[], None]) -> None:
        """Run a transactional call again while it fails with a retriable error (a coordinator
        loading or moving), as librdkafka asks; up to the transaction timeout."""
        try:
            keep_trying(
                lambda: self.call(what, operation),
                when=_retriable,
                every_s=0.1,
                for_s=self.timeout_s,
            )
        except KafkaException as exc:
            self._on_fatal(exc.args[0])
            raise

    def begin(self) -> Producer:
        producer = self.producer
        producer.begin_transaction()
        self.in_transaction = True
        return producer

    def produce(self, topic: str, value: bytes | None, **kwargs: Any) -> None:
        writing.produce(self.producer, topic, value, timeout_s=self.timeout_s, **kwargs)

    def send_offsets(self, positions: list[TopicPartition], consumer: Consumer) -> None:
        """Put the consumer's ``positions`` into the open transaction."""
        if not positions:
            return
        producer, timeout = self.producer, self.timeout_s
        metadata = consumer.consumer_group_metadata()
        self._retrying(
            "send_offsets_to_transaction",
            lambda: producer.send_offsets_to_transaction(positions, metadata, timeout),
        )

    def commit(
        self, positions: list[TopicPartition] | None = None, consumer: Consumer | None = None
    ) -> None:
        """Commit the open transaction, with the consumer's ``positions`` in it if given."""
        if positions and consumer is not None:
            self.send_offsets(positions, consumer)
        producer, timeout = self.producer, self.timeout_s
        self._retrying("commit_transaction", lambda: producer.commit_transaction(timeout))
        self.in_transaction = False

    def end_pending_offsets(self, partitions: list[TopicPartition], consumer: Consumer) -> None:
        """Begin a transaction with offsets of the consumer's group for ``partitions`` and
        abort it: the abort marker ends every transactional offset commit this producer id
        left pending in the group, which a read_committed ``committed()`` would otherwise
        wait on (the offsets sent are never applied)."""
        self.begin()
        try:
            self.send_offsets(
                [TopicPartition(tp.topic, tp.partition, 0) for tp in partitions], consumer
            )
        finally:
            self.abort()

    def fail(self, cause: BaseException) -> None:
        """The open transaction cannot be committed. A refused record (an abortable error)
        aborts it and the producer goes on; a fatal error, a stuck call or a timeout (Kafka
        away) drops the producer: the next turn's ``init_transactions`` aborts the transaction
        on the broker, and a producer that went through an outage is not trusted again (one
        was seen to wedge in ``send_offsets_to_transaction`` after a broker restart)."""
        if isinstance(cause, KafkaException):
            error: KafkaError = cause.args[0]
            if error.fatal():
                if self._producer is not None:  # not counted yet where it was raised
                    self._on_fatal(error)
                return
            if not error.txn_requires_abort():
                self.log.info("dropping the producer after %s", error.str())
                self.drop()
                return
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
        """Forget the producer without waiting on it (it may be stuck); the next turn starts a
        new one. Its queue is purged and its destruction happens on a thread of its own."""
        producer, self._producer = self._producer, None
        self.in_doubt |= self.in_transaction
        self.in_transaction = False
        if producer is not None:
            _dispose_later(producer)

    def settled(self) -> None:
        """The worker has read back what the dropped producer's transaction left in Kafka."""
        self.in_doubt = False

    def close(self) -> None:
        self._abandon_starting()
        producer, self._producer = self._producer, None
        if producer is not None:
            try:
                self.call("flush", lambda: producer.flush(5), 5)
            except Stuck as exc:
                self.log.warning("producer not closed cleanly: %s", exc)

    def _on_fatal(self, error: KafkaError | None) -> None:
        """A fatal producer error: the next turn starts a new producer. A fence waits longer
        each time it repeats within a minute; another fatal error twice within a minute raises
        :class:`Fenced` (see the module's docstring)."""
        if error is None or not error.fatal():
            return
        self.drop()
        now = SYSTEM_CLOCK.monotonic()
        again = self._last_fatal is not None and now - self._last_fatal < FENCED_AGAIN_S
        self._last_fatal = now
        if error.code() != KafkaError._FENCED:
            if again:
                raise Fenced(
                    f"this worker can no longer commit ({error.str()}), twice within "
                    f"{FENCED_AGAIN_S:.0f} s: Kafka refuses its transactional id"
                )
            self.log.warning("producer failed for good (%s); a new producer takes over", error)
            return
        self._fences = self._fences + 1 if again else 1
        if self._fences == 1:
            self.log.warning("producer fenced (%s); a new producer takes over", error.str())
            return
        pause = min(FENCE_BACKOFF_MAX_S, 2.0 ** (self._fences - 2))
        self._resume_at = now + pause
        self.log.error(
            "producer fenced %d times in a row within a minute (%s): a transaction open past "
            "its timeout or a late initialisation fences a producer, and so does another live "
            "worker with the same worker id; a new producer in %.0f s",
            self._fences, error.str(), pause,
        )  # fmt: skip
