"""What bench/rocketmq.py measures on each system, in one shape, and the sizes of a run.

Each column (``bench/rocketmq_apache.py`` for Apache RocketMQ, ``bench/rocketmq_adapter.py`` for
the adapter's Python clients, ``bench/rocketmq_proxy.py`` for the official client through
``rmq-adapter proxy``) fills one ``Figures``; ``bench/rocketmq.py`` sets them side by side.
"""

from __future__ import annotations

import logging
import statistics
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

log = logging.getLogger("bench.rocketmq")

THREADS = 8  # bench.transactions.run_threads' sending threads
BODY_SIZE = 100

# The seed 004 scenario (RocketMQ's own transactional example): the local transaction answers
# ROLLBACK for Num0 and Num1, UNKNOWN for Num8 and Num9 (then the check-back answers COMMIT),
# COMMIT for the rest; RocketMQ delivers exactly Num2..Num9, once each.
SEED_KEYS = tuple(f"Num{i}" for i in range(10))
SEED_ROLLBACK = frozenset({"Num0", "Num1"})
SEED_UNKNOWN = frozenset({"Num8", "Num9"})
SEED_EXPECTED = tuple(k for k in SEED_KEYS if k not in SEED_ROLLBACK)
SEED_BODIES = {key: f"Hello RocketMQ Transaction Message{key[3:]}".encode() for key in SEED_KEYS}
SEED_SEND_GAP_S = 0.01  # the example sleeps 10 ms between sends
DEFAULT_CHECK_INTERVAL_MS = 30_000  # transactionCheckInterval
FAST_CHECK_INTERVAL_MS = 1_000
# The SimpleConsumer workload (as bench/simple_consumer.py's defaults): receive(32, 30 s), a
# phase ends when every message came, after 30 s with nothing new, or after 240 s.
SIMPLE_BATCH = 32
SIMPLE_INVISIBLE_S = 30
SIMPLE_IDLE_S = 30.0
SIMPLE_TIMEOUT_S = 240.0

# What ``--workloads`` selects from (bench/rocketmq.py), in the order each side runs them, and
# the name each is logged and noted under.
WORKLOAD_NAMES = {
    "transactions": "transactional throughput and latency",
    "normal": "normal sync sends",
    "delays": "delayed messages",
    "simple": "5.x SimpleConsumer",
    "push": "5.x PushConsumer",
    "seed": "seed 004",
}
WORKLOADS = tuple(WORKLOAD_NAMES)


@dataclass(frozen=True, slots=True)
class Sizes:
    """Message counts and paces, and which workloads run; ``quick()`` makes a run take a few
    minutes."""

    warm_up: int = 2_000  # untimed transactions and sends first: both sides' JVMs are cold
    tx_messages: int = 20_000
    paced: int = 2_000
    pace: float = 500.0
    normal: int = 20_000
    delay_burst: int = 400
    delay_paced: int = 200
    delay_pace: float = 20.0
    delays_s: tuple[int, ...] = (1, 5)  # the adapter's delay levels 1 and 2
    seed_watch_s: float = 10.0  # after the last expected delivery, watch for duplicates
    seed_runs: int = 3  # per check interval: RocketMQ's duplicates come in some runs, not all
    simple: int = 5_000  # messages pre-filled, then drained by SimpleConsumer.receive + ack
    simple_threads: tuple[int, ...] = (1, 4)  # threads sharing one SimpleConsumer, per phase
    push: int = 2_000  # messages to a PushConsumer, send to listener, paced
    push_pace: float = 200.0
    proxies: int = 1  # proxy processes sharing one port (the proxy's column)
    proxy_plaintext: bool = False  # the proxy's --plaintext (no TLS, no front)
    workloads: tuple[str, ...] = WORKLOADS

    def quick(self) -> Sizes:
        return replace(
            self,
            warm_up=500,
            tx_messages=1_000,
            paced=300,
            normal=1_000,
            delay_burst=100,
            delay_paced=40,
            seed_watch_s=5.0,
            seed_runs=1,
            simple=1_000,
            push=300,
        )


def body(tag: str, i: int) -> bytes:
    """A unique ``BODY_SIZE``-byte body (as bench.transactions.body)."""
    return f"{tag}:{i:09d}:".encode().ljust(BODY_SIZE, b".")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class Latency:
    """Percentiles of a set of millisecond values."""

    count: int
    p50: float
    p99: float
    max: float

    @classmethod
    def of(cls, values: list[int] | list[float]) -> Latency | None:
        if not values:
            return None
        if len(values) == 1:
            v = float(values[0])
            return cls(1, v, v, v)
        q = statistics.quantiles(values, n=100, method="inclusive")
        return cls(len(values), q[49], q[98], float(max(values)))

    def cell(self) -> str:
        """``p50 / p99 / max`` in ms."""
        return f"{_ms(self.p50)} / {_ms(self.p99)} / {_ms(self.max)}"


def _ms(value: float) -> str:
    return f"{value:.1f}" if abs(value) < 10 else f"{value:,.0f}"


@dataclass(slots=True)
class Throughput:
    """Messages per second; ``complete`` is False when not every message arrived."""

    sent: int
    received: int
    per_second: float
    seconds: float
    errors: int = 0
    complete: bool = True

    @classmethod
    def of_sends(cls, sent: Any) -> Throughput:
        """The sending rate of a ``bench.transactions.run_threads`` run (every send returned)."""
        rate = sent.count / sent.seconds if sent.seconds > 0 else 0.0
        return cls(sent.count, sent.count, rate, sent.seconds, sent.errors, sent.errors == 0)

    @classmethod
    def end_to_end(cls, sent: Any, arrivals_ms: dict[bytes, int], n: int) -> Throughput:
        """Messages seen per second, from the first send to the last arrival."""
        last = max(arrivals_ms.values(), default=0)
        rate = len(arrivals_ms) / (last / 1000 - sent.started) if arrivals_ms else 0.0
        seen = len(arrivals_ms)
        return cls(sent.count, seen, rate, sent.seconds, sent.errors, seen == n)


@dataclass(slots=True)
class Delayed:
    """Lateness = consumer received - due time; early = received before due."""

    sent: int
    received: int
    lateness: Latency | None
    early: int
    duplicates: int

    @property
    def lost(self) -> int:
        return self.sent - self.received


@dataclass(slots=True)
class Seed:
    """The seed 004 run: deliveries per key, and the check-backs (key, s after the first send)."""

    deliveries: dict[str, int]
    checks: list[tuple[str, float]]
    first_check_s: float | None = None

    @property
    def arrived(self) -> list[str]:
        return [k for k in SEED_KEYS if self.deliveries.get(k)]

    @property
    def duplicates(self) -> dict[str, int]:
        return {k: n - 1 for k, n in self.deliveries.items() if n > 1}

    @property
    def as_rocketmq(self) -> bool:
        """Exactly Num2..Num9, once each."""
        return tuple(self.arrived) == SEED_EXPECTED and not self.duplicates


@dataclass(frozen=True, slots=True)
class Drained:
    """A pre-filled topic drained by ``SimpleConsumer.receive`` + ``ack``: msgs/s from the first
    received message to the last ack, and what came (from a ``bench.simple_consumer.Tally``)."""

    threads: int
    expected: int
    received: int  # deliveries, duplicates included
    distinct: int
    missing: int
    redelivered: int  # deliveries with a delivery attempt above 1
    per_second: float
    first_after_s: float | None  # from creating the consumer to the first message
    ack_failures: int
    receive_errors: int
    first_error: str | None
    filled_per_second: float  # the pre-fill's sends/s

    @property
    def duplicates(self) -> int:
        """Deliveries beyond each message's first."""
        return self.received - self.distinct

    @classmethod
    def of(cls, tally: Any, threads: int, filled_per_second: float) -> Drained:
        return cls(
            threads=threads,
            expected=tally.expected,
            received=tally.deliveries - tally.foreign,
            distinct=tally.distinct,
            missing=tally.missing,
            redelivered=tally.redelivered,
            per_second=tally.msgs_per_s(),
            first_after_s=tally.first_after_s(),
            ack_failures=tally.ack_failures,
            receive_errors=tally.receive_errors,
            first_error=tally.first_error,
            filled_per_second=filled_per_second,
        )


def simple_phases(sizes: Sizes) -> list[tuple[str, int, int]]:
    """The SimpleConsumer workload's phases, each on a topic (and group) of its own: (name,
    messages, threads); the untimed warm-up first, then one per ``sizes.simple_threads``."""
    return [
        ("WarmUp", sizes.warm_up, 1),
        *((f"{t}Threads", sizes.simple, t) for t in sizes.simple_threads),
    ]


def simple_runs(sizes: Sizes, figures: Figures, drain: Callable[[str, int, int], Drained]) -> None:
    """The SimpleConsumer workload on one side: ``drain(phase, n, threads)`` pre-fills a topic
    of the phase's own with ``n`` messages and drains it with ``threads`` threads."""
    for phase, n, threads in simple_phases(sizes):
        log.info(
            "%s: SimpleConsumer %s, %d messages, %d thread(s)", figures.system, phase, n, threads
        )
        d = drain(phase, n, threads)
        if phase == "WarmUp":
            figures.notes.append(
                f"{figures.system} SimpleConsumer warm-up (untimed, 1 thread): {d.distinct:,} of "
                f"{n:,} at {d.per_second:,.0f} msgs/s"
            )
        else:
            figures.simple[threads] = d
        if d.first_error:
            figures.notes.append(
                f"{figures.system} SimpleConsumer {phase}: {d.receive_errors} receive errors, "
                f"first: {d.first_error}"
            )


@dataclass(slots=True)
class Figures:
    """Everything one system measured; None where a workload failed (see ``notes``)."""

    system: str
    tx: Throughput | None = None
    tx_under_load: Latency | None = None
    tx_paced: Latency | None = None
    tx_paced_from_call: Latency | None = None  # RocketMQ only: from tx.commit() being called
    normal: Throughput | None = None
    delays: dict[str, Delayed] = field(default_factory=dict)  # "1 s burst", "5 s paced", ...
    seeds: dict[int, list[Seed]] = field(default_factory=dict)  # check interval ms -> runs
    simple: dict[int, Drained] = field(default_factory=dict)  # threads -> the drained topic
    push: Any = None  # bench.push_consumer.Pushed
    # The serving process's cost per workload (the proxy's column only): CPU ms per message sent,
    # and its VmRSS / VmHWM in KiB after the workload.
    cpu_ms_per_message: dict[str, float] = field(default_factory=dict)
    memory_kb: dict[str, dict[str, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    ran: bool = False
    skipped: set[str] = field(default_factory=set)  # workloads this column does not run

    def attempt(self, workload: str, run: Callable[[], None]) -> None:
        """Run one workload; a failure is noted (and logged) and the next workload runs."""
        log.info("%s: %s", self.system, workload)
        self.ran = True
        started = time.monotonic()
        try:
            run()
        except Exception as exc:  # noqa: BLE001 - reported in the table's notes
            log.error("%s: %s failed: %s", self.system, workload, exc)
            log.debug("%s", traceback.format_exc())
            self.notes.append(f"{self.system}: {workload} failed: {type(exc).__name__}: {exc}")
        else:
            log.info("%s: %s done in %.0f s", self.system, workload, time.monotonic() - started)

    def attempt_selected(self, sizes: Sizes, runs: dict[str, Callable[[], None]]) -> None:
        """``attempt`` each of ``runs`` (workload -> its run) that ``sizes.workloads`` selects,
        in ``WORKLOADS``' order."""
        for workload in WORKLOADS:
            if workload in runs and workload in sizes.workloads:
                self.attempt(WORKLOAD_NAMES[workload], runs[workload])


def delay_name(delay_s: int, paced: bool) -> str:
    return f"{delay_s} s {'paced' if paced else 'burst'}"
