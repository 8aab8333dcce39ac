"""The fast path: a transactional producer commits its own decisions, many per Kafka transaction.

Reproduces the producer's END_TRANSACTION (``DefaultMQProducerImpl.endTransaction``, applied by
the broker's ``EndTransactionProcessor``): once ``local_execute``
returned, COMMIT makes the message visible and ROLLBACK drops it. RocketMQ's broker does it on
request; here the producer does it itself, and the coordinator only records the decision:

- a COMMIT writes the real message and its END record (header ``rmq.delivered``) in the
  producer's current Kafka transaction; a ROLLBACK writes only its END;
- a group committer commits every ``group_commit_ms`` (or ``max_group`` decisions), so one Kafka
  transaction carries many RocketMQ commits. Lanes (transactional producers) take turns:
  one takes decisions while the others flush and commit theirs, each on a thread of its own,
  so no sender waits for a commit, and no group for another's.

Why it stays exactly once:

- the message and its END commit together or not at all (one Kafka transaction);
- a group commits only if every record of it was acknowledged before the earliest
  ``write_by_ms`` of its decisions (born + ``FAST_COMMIT_WINDOW_MS``). Any other decision on the
  same half message, a check answer, is written after its check, and the coordinator checks no
  half message before born + ``EARLIEST_CHECK_MS`` (the window plus the clock-skew allowance).
  So the fast-path END comes first in END's log. The coordinator reads END in order,
  read_committed, never past a transaction still open; it applies the fast-path END, and the
  later answer is a duplicate that delivers nothing;
- before checking, the coordinator also reads back a mark it wrote to END at the due time; an
  open transaction holds that back, so it does not even ask while a decision is in flight;
- a decision with less than ``MIN_TIME_LEFT_MS`` of its window left (a slow local
  transaction) is not taken: it goes to the coordinator alone, and takes no group down;
- a group that cannot commit (a record refused, too late, Kafka away, a stuck call) is aborted
  and its decisions are sent again as plain END records, which lie after the aborted ones in
  END's log: the coordinator delivers those, once (the first decision wins);
- a producer that dies mid-group leaves an open transaction that Kafka aborts after
  ``FAST_COMMIT_TRANSACTION_TIMEOUT_MS``: neither the message nor its END exists, and the
  check-back settles the half message as before.

``tests/unit/transaction/test_group_commit.py`` checks this argument on a model of END's log
(open, committed and aborted transactions, late records, skewed clocks, dead producers).

Known gaps: until Kafka aborts a dead producer's transaction, read_committed readers of the
partitions it wrote (END and the real topics) see nothing past it: up to the transaction timeout
plus the broker's ``transaction.abort.timed.out.transaction.cleanup.interval.ms``. Each producer
instance has transactional ids of its own (random), so a restarted process does not fence its
predecessor; the broker's timeout does. Clocks of producers and coordinators must agree within
``CLOCK_SKEW_ALLOWANCE_MS``.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from adapter.clock import SYSTEM_CLOCK, Clock
from adapter.config import CONCURRENT_TRANSACTIONS_BACKOFF_MS, HEADROOM
from adapter.exceptions import AdapterError
from adapter.kafka.transactor import Transactor
from adapter.producer.config import ProducerConfig
from adapter.producer.sender import Outgoing
from adapter.transaction.timing import FAST_COMMIT_TRANSACTION_TIMEOUT_MS
from adapter.wire.records import EndTransaction

log = logging.getLogger(__name__)

LANES = 4
"""Transactional producers taking turns. Kafka answers "concurrent transactions" to a producer
that starts its next transaction while the markers of its last commit are still being written,
and librdkafka asks again about 20 ms later; with four lanes a producer is used again only after
three other commits, which took the flush's p99 from about 110 to about 70 ms here."""
IDLE_WAIT_S = 0.5
MIN_TIME_LEFT_MS = 200
"""A decision joins a group only with this long left before its ``write_by_ms``: enough for
the group's linger, flush and deadline check under load (flush p99 about 70 ms here). One
with less goes to the coordinator on its own: were it let in, it would make its whole group
too late, and every decision in it would fall back."""
"""Longest the committer sleeps with nothing to do, so that close() is noticed."""


@dataclass(frozen=True, slots=True)
class Decision:
    """One producer decision on the fast path: its records (the real message first, for a
    COMMIT, then END) and the time by which they must all be acknowledged."""

    end: EndTransaction
    records: tuple[Outgoing, ...]
    write_by_ms: int


@dataclass(frozen=True, slots=True)
class GroupTimes:
    """When one group's steps happened, on the system's monotonic clock (seconds): for
    measuring where a commit's time goes (``bench/commit_breakdown.py``)."""

    message_ids: tuple[str, ...]
    handed: tuple[tuple[float, float], ...]
    """Per decision: when :meth:`GroupCommitter.submit` began, and when its records were in the
    open Kafka transaction (begin, when it was the first, and produce)."""
    taken: float
    """When the committer took the group (its linger over, and its turn)."""
    flushed: float
    """When every record of the group was acknowledged."""
    committed: float
    """When ``commit_transaction`` returned (or the group fell back)."""
    ok: bool


@dataclass(eq=False)
class _Lane:
    tx: Transactor
    group: list[Decision] = field(default_factory=list)
    handed: list[tuple[float, float]] = field(default_factory=list)
    opened_s: float = 0.0
    ready: bool = False
    broken: str | None = None
    """Why a decision could not be added to the open transaction (it must then abort)."""
    finishing: bool = False
    """Its group is being flushed and committed, on a thread of its own."""


class GroupCommitter:
    """Commits decisions in groups on a thread of its own; :meth:`submit` hands one over."""

    def __init__(
        self,
        settings: Callable[[str], dict[str, Any]],
        *,
        name: str,
        fallback: Callable[[EndTransaction], None],
        timeout_s: float,
        linger_ms: int = 5,
        max_group: int = 500,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._fallback = fallback
        self._clock = clock
        """Protocol time (birth, deadlines); the linger is measured on the system's clock."""
        self.linger_s = linger_ms / 1000
        """How long a group's first decision waits for others before the group commits."""
        self._max_group = max_group
        self.timeout_s = timeout_s
        self._stopping = stopping = threading.Event()
        prefix = f"rmq-adapter-fast-{name}-{uuid.uuid4().hex[:12]}"
        self._lanes = [
            _Lane(Transactor(_settings_for(settings, f"{prefix}-{i}"), timeout_s, log, stopping))
            for i in range(LANES)
        ]
        self._current = 0
        self._cond = threading.Condition()
        self._closing = False
        self._thread: threading.Thread | None = None
        self._unavailable = False
        self.committed = 0
        """Decisions committed on the fast path."""
        self.fell_back = 0
        """Decisions handed to the coordinator because their group could not commit."""
        self.too_late = 0
        """Decisions not taken because their window was (nearly) over: a slow local
        transaction's, sent the plain way by the caller."""
        self._pending = 0
        """Decisions handed over and neither committed nor handed back yet."""
        self.observe: Callable[[GroupTimes], None] | None = None
        """Told the :class:`GroupTimes` of every group once it is committed or fell back
        (a benchmark's hook; called on the thread that finished the group)."""

    # -- lifecycle --------------------------------------------------------------------------

    def start(self, wait_s: float = 0.0) -> None:
        """Start committing; wait up to ``wait_s`` for the first producer to be ready (until
        then decisions go the plain way)."""
        self._thread = threading.Thread(target=self._run, name="group-commit", daemon=True)
        self._thread.start()
        with self._cond:
            self._cond.wait_for(lambda: self._lanes[0].ready, wait_s)

    def close(self, timeout_s: float = 10.0) -> None:
        """Commit what was handed over, then stop; the producers are closed."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.error("the group committer did not stop within %g s", timeout_s)
        self._stopping.set()
        for lane in self._lanes:
            lane.tx.close()

    @property
    def ready(self) -> bool:
        """Whether decisions can take the fast path now (its first producer is initialised)."""
        return self._lanes[0].ready

    def flush(self, timeout_s: float) -> int:
        """Wait up to ``timeout_s`` until every decision handed over is committed or handed
        back to the fallback; returns how many are still pending."""
        with self._cond:
            self._cond.wait_for(lambda: self._pending == 0, timeout_s)
            return self._pending

    # -- the senders' side --------------------------------------------------------------------

    def submit(self, decision: Decision) -> bool:
        """Add ``decision`` to the open group; False if the fast path cannot take it now, or
        not in time (the caller then sends its END the plain way)."""
        if self._clock.now_ms() + MIN_TIME_LEFT_MS >= decision.write_by_ms:
            self.too_late += 1
            return False
        handed_s = SYSTEM_CLOCK.monotonic()
        with self._cond:
            lane = self._lanes[self._current]
            if self._closing or not lane.ready or lane.broken:
                return False
            try:
                if not lane.tx.in_transaction:
                    lane.tx.begin()
                    lane.opened_s = SYSTEM_CLOCK.monotonic()
                for record in decision.records:
                    lane.tx.produce(record.topic, record.value, **record.produce_kwargs())
            except Exception as exc:  # noqa: BLE001 - the group aborts; the caller falls back
                lane.broken = str(exc)
                self._cond.notify_all()
                return False
            lane.group.append(decision)
            lane.handed.append((handed_s, SYSTEM_CLOCK.monotonic()))
            self._pending += 1
            if len(lane.group) == 1 or len(lane.group) >= self._max_group:
                self._cond.notify_all()
            return True

    # -- the committer's side -----------------------------------------------------------------

    def _run(self) -> None:
        with ThreadPoolExecutor(LANES, thread_name_prefix="group-commit") as finishers:
            while True:
                for lane in self._lanes:
                    self._prepare(lane)
                with self._cond:
                    lane = self._lanes[self._current]
                    if not self._due(lane):
                        if self._closing and not lane.group:
                            return  # leaving the executor waits for the lanes finishing
                        self._cond.wait(self._wait_s(lane))
                        continue
                    following = self._next_lane()
                    if following is None:  # woken when a lane is done
                        self._cond.wait(IDLE_WAIT_S)
                        continue
                    self._current = following
                    lane.finishing = True
                finishers.submit(self._finish, lane)

    def _next_lane(self) -> int | None:
        """The lane after the current one, in turn, preferring one that is ready, of those not
        finishing a group; None while every other lane is still finishing (the current group
        then stays open, and takes the decisions that come)."""
        count = len(self._lanes)
        turn = [(self._current + i) % count for i in range(1, count)]
        free = [i for i in turn if not self._lanes[i].finishing]
        return next((i for i in free if self._lanes[i].ready), free[0] if free else None)

    def _due(self, lane: _Lane) -> bool:
        if lane.broken:
            return True
        if not lane.group:
            return False
        age = SYSTEM_CLOCK.monotonic() - lane.opened_s
        return self._closing or len(lane.group) >= self._max_group or age >= self.linger_s

    def _wait_s(self, lane: _Lane) -> float:
        if not lane.group:
            return IDLE_WAIT_S if all(lane.ready for lane in self._lanes) else 0.1
        age = SYSTEM_CLOCK.monotonic() - lane.opened_s
        return max(0.001, min(IDLE_WAIT_S, self.linger_s - age))

    def _prepare(self, lane: _Lane) -> None:
        """A lane without a usable producer gets a new one (its first, or after a failure);
        senders fall back to the plain path meanwhile."""
        if lane.ready or lane.finishing or self._closing:
            return
        try:
            lane.tx.open()
        except Exception as exc:  # noqa: BLE001 - retried on the next round
            if not self._unavailable:
                log.warning("fast commit unavailable (%s); decisions go the plain way", exc)
            self._unavailable = True
            return
        if self._unavailable:
            log.info("fast commit available again")
            self._unavailable = False
        with self._cond:
            lane.ready = True
            self._cond.notify_all()

    def _finish(self, lane: _Lane) -> None:
        """Flush, check the deadline, commit; on any failure abort and fall back."""
        group, lane.group = lane.group, []
        handed, lane.handed = lane.handed, []
        broken, lane.broken = lane.broken, None
        taken = flushed = SYSTEM_CLOCK.monotonic()
        ok = False
        try:
            if broken is not None:
                raise AdapterError(f"a decision could not be added: {broken}")
            producer, timeout = lane.tx.producer, self.timeout_s
            remaining = lane.tx.call("flush", lambda: producer.flush(timeout), timeout)
            flushed = SYSTEM_CLOCK.monotonic()
            if remaining:
                raise AdapterError(f"{remaining} records unacknowledged after {timeout:g} s")
            late = self._clock.now_ms() - min(d.write_by_ms for d in group)
            if late >= 0:
                raise _TooLate(f"acknowledged {late} ms past the fast-commit window")
            lane.tx.commit()
        except Exception as exc:  # noqa: BLE001 - every failure ends the same way
            self._fall_back(lane, group, exc)
        else:
            ok = True
        with self._cond:
            if ok:
                self.committed += len(group)
            else:
                self.fell_back += len(group)
            self._pending -= len(group)
            lane.finishing = False
            self._cond.notify_all()
        observe = self.observe
        if observe is not None and group:
            ids = tuple(d.end.transaction_id for d in group)
            observe(GroupTimes(ids, tuple(handed), taken, flushed, SYSTEM_CLOCK.monotonic(), ok))

    def _fall_back(self, lane: _Lane, group: list[Decision], cause: Exception) -> None:
        try:
            lane.tx.fail(cause)
        except Exception:  # noqa: BLE001 - the producer is replaced either way
            lane.tx.drop()
        if not lane.tx.started:
            lane.ready = False
        if group:
            # past the window is the design's safety valve under load (INFO; the fell_back
            # counter shows how often); anything else is a fault worth a WARNING
            log.log(
                logging.INFO if isinstance(cause, _TooLate) else logging.WARNING,
                "a group of %d decisions was not committed (%s); the coordinator delivers them",
                len(group),
                cause,
            )
        for decision in group:
            self._fallback(decision.end)


class _TooLate(Exception):
    """The group was acknowledged after its fast-commit window: it must not commit."""


def _settings_for(
    settings: Callable[[str], dict[str, Any]], transactional_id: str
) -> Callable[[], dict[str, Any]]:
    return lambda: settings(transactional_id)


def lane_settings(config: ProducerConfig, transactional_id: str) -> dict[str, Any]:
    """A transactional producer of the fast path: the application's settings, and a
    short transaction timeout, as its transactions last milliseconds and one left open
    by a dead process holds back what read_committed readers see until the broker
    aborts it. Its records carry the message and its END record: twice the headroom."""
    settings = config.producer_settings(transactional_id, 2 * HEADROOM)
    return config.kafka.librdkafka(
        {
            **settings,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": FAST_COMMIT_TRANSACTION_TIMEOUT_MS,
            # A group's records go out when the group is flushed (flush ignores the
            # linger): one produce request per group. 1 ms sent a request per millisecond
            # and kept librdkafka's threads busy: 2,000 transactions/s here against 3,000.
            "linger.ms": 100,
            "retry.backoff.ms": CONCURRENT_TRANSACTIONS_BACKOFF_MS,
        }
    )
