"""The adapter beside a real Apache RocketMQ 5.4.0: the same workloads, one run, one table.

``python -m bench.rocketmq [--quick]`` (or ``make bench-rocketmq``) first runs every workload
against Apache RocketMQ 5.4.0 (name server + proxy in Local mode with its embedded broker, from
the Maven Central jars, ``bench/rocketmq_server.py``) through the official 5.x Python client
(``bench/rocketmq_apache.py``), stops it, then runs the same workloads against the adapter on a
Kafka broker of its own with the adapter's worker processes (``bench/rocketmq_adapter.py``),
then, third, the RocketMQ column's very workload code (the official client) against
``rmq-adapter proxy`` on a Kafka broker of its own with those workers, only the endpoint changed
(``bench/rocketmq_proxy.py``: its sending workloads receive through a Kafka reader, its
SimpleConsumer workload through the proxy; the proxy's CPU ms per message and RSS are rows of
the table). Never two stacks at once: they share the machine's cores with the clients.

Measured on each side (100-byte bodies, 8 sending threads sharing one producer, a receiver in a
child process that stamps when each message first arrives; latencies in ms). Both sides first
send untimed warm-up messages (2,000 transactions and sends, 100 delayed messages): freshly
started JVMs run cold (RocketMQ's first thousand transactions ran at a third of the warm rate).

- transactional throughput: N messages (default 20,000) each in its own transaction, committed;
  committed messages/s end to end = received / (last arrival - first send).
- commit-to-visible, paced: P messages (default 2,000) at ~500/s, so that the figure is latency,
  not queueing. RocketMQ: from ``tx.commit()`` returning; the adapter: from ``local_execute``
  returning COMMIT, before the adapter's own commit step (so that step counts against it; the
  notes give RocketMQ's figure from ``tx.commit()`` being called too). Under load: the same
  measure over the throughput run's messages.
- normal sync sends/s: S messages (default 20,000), ``Producer.send`` / ``send_sync``.
- delayed messages at 1 s and 5 s (RocketMQ: ``delivery_timestamp``, which the 5.x client sends
  in whole seconds, so a burst's messages fall due together at one or two whole seconds; the
  adapter: delay levels 1 and 2), a burst of 400 from 8 threads and 200 paced at 20/s each.
  Lateness = received - due time (RocketMQ: the message's delivery timestamp; the adapter: the
  SCHEDULE record's LogAppendTime + the delay); early = received before due; lost = never received
  within due + 60 s.
- seed 004 (RocketMQ's own transactional example, as in ``make demo``): Num0..Num9, the local
  transaction answers ROLLBACK for Num0 and Num1, UNKNOWN for Num8 and Num9 (the check-back then
  answers COMMIT) and COMMIT otherwise. With the default check interval (30 s) and with 1 s
  (RocketMQ: ``mqadmin updateBrokerConfig transactionCheckInterval 1000``; the adapter:
  ``--check-interval-ms 1000``): which messages arrived, and how often each, watched for 10 s
  after the last expected one arrived; 3 runs per interval (1 with ``--quick``), each on a topic
  of its own, as RocketMQ's duplicates come in some runs and not in others.

- 5.x SimpleConsumer: per phase a topic of its own pre-filled with S messages (default 5,000,
  100 B; RocketMQ: a NORMAL topic, ``Producer.send`` from 8 threads; the adapter: the 5.x
  ``Producer``'s ``send_async``), then drained by ``receive(32, 30 s)`` + ``ack`` each, from 1
  thread, then from 4 threads sharing one ``SimpleConsumer`` (the official one; the adapter's
  ``adapter.v5.SimpleConsumer``, ``bench/simple_consumer.py``'s loop on both). msgs/s from the
  first received message to the last ack; received, distinct, duplicates, missing. An untimed
  1-thread phase of the warm-up size comes first on each side. RocketMQ waits 1.5 s between
  ``startup()`` and the first ``receive``; the adapter's first receive waits for its share group
  join; neither is in the rate. Long polls: 2 s on the adapter, 5 s on RocketMQ (its proxy's
  least); they only wait once the topic is drained.

- 5.x PushConsumer: a consumer started first (one untimed message must reach its listener),
  then P messages (default 2,000, 100 B) at 200/s from 8 threads with ``Producer.send``: send
  to listener p50 / p99 / max ms, lost, duplicates (``bench/push_consumer.py``; RocketMQ and the
  proxy: the official ``PushConsumer``; the adapter: ``adapter.v5.PushConsumer``).

``--workloads simple`` (or any of transactions, normal, delays, simple, push, seed) runs only
those, on both sides; ``--simple N`` sets S; ``--proxies N`` runs the proxy's column on N proxy
processes sharing one port (``--reuse-port``), their CPU and memory summed.

The table (workload | RocketMQ | adapter | proxy | adapter/RocketMQ | proxy/RocketMQ, with the
better direction; ``--only rocketmq|adapter|proxy`` fills one column) goes to the terminal
and, as Markdown, to ``bench/.out/rocketmq/report.md`` for BENCHMARKS.md. ``--quick`` makes
every count small (about 5 minutes in all before the third column); the default sizes take
about 8 minutes on 2 cores, measured before the SimpleConsumer workload, which adds about 30 s
a side. JVM,
coordinator and client logs stay under ``bench/.out/rocketmq/``.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import adapter
from bench.common import GROUP_COMMIT_ENV, ROOT, machine
from bench.rocketmq_figures import (
    DEFAULT_CHECK_INTERVAL_MS,
    FAST_CHECK_INTERVAL_MS,
    SEED_EXPECTED,
    SIMPLE_BATCH,
    SIMPLE_INVISIBLE_S,
    WORKLOADS,
    Delayed,
    Drained,
    Figures,
    Latency,
    Seed,
    Sizes,
    Throughput,
    delay_name,
)
from bench.rocketmq_server import OUT, RocketMQConfig, new_run_dir, rocketmq

REPORT = OUT / "report.md"
HEADER = (
    "workload",
    "RocketMQ 5.4.0",
    "adapter",
    "rmq-adapter proxy",
    "adapter / RocketMQ",
    "proxy / RocketMQ",
)

log = logging.getLogger("bench.rocketmq")


# -- cells ------------------------------------------------------------------------------------


def _rate(t: Throughput | None) -> str:
    if t is None:
        return "failed"
    text = f"{t.per_second:,.0f}/s"
    if not t.complete:
        text += f" (INCOMPLETE: {t.received:,} of {t.sent:,})"
    if t.errors:
        text += f" ({t.errors} errors)"
    return text


def _higher(ours: Throughput | Drained | None, theirs: Throughput | Drained | None) -> str:
    if ours is None or theirs is None or not theirs.per_second:
        return "-"
    return f"{ours.per_second / theirs.per_second:.2f}x (higher is better)"


def _drained(d: Drained | None) -> str:
    if d is None:
        return "failed"
    text = (
        f"{d.per_second:,.0f}/s; {d.received:,} received, {d.distinct:,} distinct, "
        f"{d.duplicates} duplicates, {d.missing} missing"
    )
    extra = [
        f"{n} {what}"
        for n, what in (
            (d.redelivered, "with delivery attempt > 1"),
            (d.ack_failures, "acks refused"),
            (d.receive_errors, "receive errors"),
        )
        if n
    ]
    return text + "".join(f", {e}" for e in extra)


def _latency(value: Latency | None) -> str:
    return "failed" if value is None else value.cell()


def _lower(ours: Latency | None, theirs: Latency | None) -> str:
    if ours is None or theirs is None:
        return "-"

    def one(a: float, b: float) -> str:
        return f"{a / b:.2f}x" if b > 0 else "-"

    return f"p50 {one(ours.p50, theirs.p50)}, p99 {one(ours.p99, theirs.p99)} (lower is better)"


def _delayed(d: Delayed | None) -> str:
    if d is None:
        return "failed"
    text = _latency(d.lateness) if d.lateness else "nothing received"
    text += f"; {d.early} early, {d.lost} lost"
    return text + (f", {d.duplicates} duplicates" if d.duplicates else "")


def _pushed(pushed: Any) -> str:
    if pushed is None:
        return "failed"
    text = _latency(pushed.latency) if pushed.latency else "nothing received"
    text += f"; {pushed.lost} lost"
    return text + (f", {pushed.duplicates} duplicates" if pushed.duplicates else "")


def _delay_ratio(ours: Delayed | None, theirs: Delayed | None) -> str:
    if ours is None or theirs is None:
        return "-"
    return _lower(ours.lateness, theirs.lateness)


def _keys(keys: list[str]) -> str:
    """Num2..Num9 for a run of consecutive keys, else the list."""
    numbers = [int(k[3:]) for k in keys]
    if len(numbers) > 2 and numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"Num{numbers[0]}..Num{numbers[-1]}"
    return ", ".join(keys) or "nothing"


def _exact(runs: list[Seed]) -> str:
    return f"{sum(s.as_rocketmq for s in runs)} of {len(runs)} runs"


def _seed(runs: list[Seed] | None) -> str:
    """How many runs delivered exactly Num2..Num9 once each; what the others delivered; when
    the first check came."""
    if not runs:
        return "failed"
    text = f"exactly once in {_exact(runs)}"
    for i, s in enumerate(runs, 1):
        if s.as_rocketmq:
            continue
        wrong = "" if tuple(s.arrived) == SEED_EXPECTED else f"{_keys(s.arrived)} arrived"
        dups = ", ".join(f"{k} +{n}" for k, n in sorted(s.duplicates.items()))
        text += f"; run {i}: " + ", ".join(x for x in (wrong, dups and f"duplicates {dups}") if x)
    firsts = [s.first_check_s for s in runs if s.first_check_s is not None]
    if firsts:
        low, high = f"{min(firsts):.1f}", f"{max(firsts):.1f}"
        span = low if low == high else f"{low}-{high}"
        text += f"; first check {span} s after sending"
    return text


def _seed_ratio(ours: list[Seed] | None, theirs: list[Seed] | None) -> str:
    """Runs that delivered exactly Num2..Num9 once each (RocketMQ's documented outcome)."""
    if not ours or not theirs:
        return "-"
    return f"exactly once: {_exact(ours)} (RocketMQ {_exact(theirs)})"


def _memory(kb: dict[str, int] | None) -> str:
    if not kb:
        return "-"
    return f"{kb.get('VmRSS', 0) / 1024:,.0f} / {kb.get('VmHWM', 0) / 1024:,.0f}"


# -- the table --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Line:
    """One row: its workload (for columns that skipped it), label, a column's cell, and a
    column's figure against RocketMQ's (``ratio(ours, rocketmq, key)``)."""

    workload: str
    label: str
    cell: Callable[[Figures, Any], str]  # (figures, key)
    ratio: Callable[[Figures, Figures, Any], str] = lambda _ours, _theirs, _key: "-"
    key: Any = None  # the delay, threads, check interval or workload of the row


def rows(sizes: Sizes, rmq: Figures, ours: Figures, proxy: Figures) -> list[tuple[str, ...]]:
    """The table: workload, the three columns' cells, then the adapter's and the proxy's
    figures against RocketMQ's."""

    def cell(line: Line, figures: Figures) -> str:
        if not figures.ran or line.workload in figures.skipped:
            return "not run"
        return line.cell(figures, line.key)

    def ratio(line: Line, figures: Figures) -> str:
        if "not run" in (cell(line, figures), cell(line, rmq)):
            return "-"
        return line.ratio(figures, rmq, line.key)

    return [
        (
            line.label,
            *(cell(line, f) for f in (rmq, ours, proxy)),
            *(ratio(line, f) for f in (ours, proxy)),
        )
        for line in _lines(sizes)
    ]


def _lines(sizes: Sizes) -> list[Line]:
    """The rows of the workloads that ran (``sizes.workloads``), in the table's order."""
    wanted = set(sizes.workloads)
    out: list[Line] = []
    if "transactions" in wanted:
        out += [
            Line(
                "transactions",
                f"transactional, committed msgs/s end to end ({sizes.tx_messages:,}, 8 threads, "
                "100 B)",
                lambda f, _k: _rate(f.tx),
                lambda o, t, _k: _higher(o.tx, t.tx),
            ),
            Line(
                "transactions",
                f"commit-to-visible, paced {sizes.pace:,.0f}/s ({sizes.paced:,}): p50 / p99 / max "
                "ms",
                lambda f, _k: _latency(f.tx_paced),
                lambda o, t, _k: _lower(o.tx_paced, t.tx_paced),
            ),
            Line(
                "transactions",
                "commit-to-visible under load (the throughput run): p50 / p99 / max ms",
                lambda f, _k: _latency(f.tx_under_load),
                lambda o, t, _k: _lower(o.tx_under_load, t.tx_under_load),
            ),
        ]
    if "normal" in wanted:
        out.append(
            Line(
                "normal",
                f"normal sync sends/s ({sizes.normal:,}, 8 threads, 100 B)",
                lambda f, _k: _rate(f.normal),
                lambda o, t, _k: _higher(o.normal, t.normal),
            )
        )
    for delay_s in sizes.delays_s if "delays" in wanted else ():
        for paced in (False, True):
            name = delay_name(delay_s, paced)
            how = (
                f"{sizes.delay_paced} at {sizes.delay_pace:.0f}/s"
                if paced
                else f"burst of {sizes.delay_burst}"
            )
            out.append(
                Line(
                    "delays",
                    f"delayed +{delay_s} s, {how}: lateness p50 / p99 / max ms",
                    lambda f, k: _delayed(f.delays.get(k)),
                    lambda o, t, k: _delay_ratio(o.delays.get(k), t.delays.get(k)),
                    name,
                )
            )
    for threads in sizes.simple_threads if "simple" in wanted else ():
        sharing = "1 thread" if threads == 1 else f"{threads} threads sharing it"
        out.append(
            Line(
                "simple",
                f"5.x SimpleConsumer, `receive({SIMPLE_BATCH}, {SIMPLE_INVISIBLE_S})` + `ack` "
                f"each, {sharing} ({sizes.simple:,} pre-filled, 100 B): msgs/s",
                lambda f, k: _drained(f.simple.get(k)),
                lambda o, t, k: _higher(o.simple.get(k), t.simple.get(k)),
                threads,
            )
        )
    if "push" in wanted:
        out.append(
            Line(
                "push",
                f"5.x PushConsumer, send to listener, paced {sizes.push_pace:,.0f}/s "
                f"({sizes.push:,}, 100 B): p50 / p99 / max ms",
                lambda f, _k: _pushed(f.push),
                lambda o, t, _k: _lower(
                    o.push.latency if o.push else None, t.push.latency if t.push else None
                ),
            )
        )
    for interval, label in (
        (DEFAULT_CHECK_INTERVAL_MS, "default check interval (30 s)"),
        (FAST_CHECK_INTERVAL_MS, "check interval 1 s"),
    ):
        if "seed" in wanted:
            out.append(
                Line(
                    "seed",
                    f"seed 004 (Num0..Num9), {label}: delivered",
                    lambda f, k: _seed(f.seeds.get(k)),
                    lambda o, t, k: _seed_ratio(o.seeds.get(k), t.seeds.get(k)),
                    interval,
                )
            )
    for workload in (w for w in WORKLOADS if w in wanted and w != "seed"):
        out.append(
            Line(
                workload,
                f"serving process CPU ms per message sent, {workload} (warm-up included)",
                lambda f, k: f"{f.cpu_ms_per_message[k]:.2f}" if k in f.cpu_ms_per_message else "-",
                key=workload,
            )
        )
    out.append(
        Line(
            "",
            "serving process RSS / peak RSS at the end, MiB",
            lambda f, _k: _memory(list(f.memory_kb.values())[-1] if f.memory_kb else None),
        )
    )
    return out


def markdown(table: list[tuple[str, ...]]) -> str:
    cells = [HEADER, *table]
    widths = [max(len(r[i]) for r in cells) for i in range(len(HEADER))]
    lines = [
        "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in cells
    ]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def kafka_version() -> str:
    found = re.search(r"<kafka.version>([^<]+)<", (ROOT / "infra" / "pom.xml").read_text())
    return found.group(1) if found else "?"


def report(
    sizes: Sizes, rmq: Figures, ours: Figures, proxy: Figures, command: str, seconds: float
) -> str:
    notes = [*rmq.notes, *ours.notes, *proxy.notes]
    for figures in (rmq, proxy):
        if figures.tx_paced_from_call is not None:
            notes.append(
                f"{figures.system} commit-to-visible (paced) from `tx.commit()` being called "
                f"rather than returning: {figures.tx_paced_from_call.cell()} ms"
            )
    for figures in (rmq, ours, proxy):
        for interval, runs in sorted(figures.seeds.items()):
            checks = "; ".join(
                f"run {i}: " + (", ".join(f"{k} {at:.1f} s" for k, at in s.checks) or "none")
                for i, s in enumerate(runs, 1)
            )
            notes.append(
                f"{figures.system} seed 004, check interval {interval} ms, check-backs "
                f"(s after the first send): {checks}"
            )
    for figures in (rmq, ours):
        for threads, d in sorted(figures.simple.items()):
            first = "-" if d.first_after_s is None else f"{d.first_after_s:.1f} s"
            notes.append(
                f"{figures.system} SimpleConsumer, {threads} thread(s): pre-filled at "
                f"{d.filled_per_second:,.0f} msgs/s; first message {first} after creating the "
                "consumer"
            )
    how = ["--quick"] if "--quick" in command else []
    if set(sizes.workloads) != set(WORKLOADS):
        how.append(f"workloads: {', '.join(sizes.workloads)}")
    quick = f" ({'; '.join(how)})" if how else ""
    seed_line = (
        [
            "",
            f"Seed 004 expects exactly {SEED_EXPECTED[0]}..{SEED_EXPECTED[-1]}, once each; "
            f"{sizes.seed_runs} run(s) per check interval, each on a topic of its own, "
            f"duplicates watched for {sizes.seed_watch_s:.0f} s after the last expected message "
            "arrived.",
        ]
        if "seed" in sizes.workloads
        else []
    )
    lines = [
        f"## The adapter beside Apache RocketMQ 5.4.0{quick}",
        "",
        f"{time.strftime('%Y-%m-%d')}, {machine()}; RocketMQ 5.4.0 (name server + proxy in Local "
        f"mode, one broker) through rocketmq-python-client 5.1.2; rmq-kafka-adapter "
        f"{adapter.__version__} on Apache Kafka {kafka_version()} (one local broker) with the "
        f"worker processes its workloads need, driven by its own Python clients (adapter) and "
        f"by rocketmq-python-client 5.1.2 through `rmq-adapter proxy` (proxy; the same workload "
        f"code as RocketMQ's column, only the endpoint changed; its sending workloads receive "
        f"with a Kafka reader, its SimpleConsumer through the proxy). One system at a time; "
        f"their clients ran on the same machine; "
        f"{seconds / 60:.0f} minutes in all. `{command}`.",
        "",
        markdown(rows(sizes, rmq, ours, proxy)),
        *seed_line,
    ]
    if notes:
        lines += ["", "Notes:", "", *(f"- {n}" for n in notes)]
    return "\n".join(lines) + "\n"


# -- main -------------------------------------------------------------------------------------


def run_rocketmq(sizes: Sizes, figures: Figures) -> None:
    from bench import rocketmq_apache  # imports the 5.x client (the bench extra)

    log.info("starting Apache RocketMQ 5.4.0 (name server, proxy in Local mode)...")
    with rocketmq(RocketMQConfig(new_run_dir())) as server:
        rocketmq_apache.run(server, sizes, figures)
    log.info("RocketMQ stopped")


def run_adapter(sizes: Sizes, figures: Figures) -> None:
    from bench import rocketmq_adapter

    log.info("starting a Kafka broker and the adapter's workers...")
    rocketmq_adapter.run(sizes, figures)
    log.info("Kafka broker and workers stopped")


def run_proxy(sizes: Sizes, figures: Figures) -> None:
    from bench import rocketmq_proxy  # imports the 5.x client (the bench extra)

    log.info("starting a Kafka broker, the adapter's workers and rmq-adapter proxy...")
    rocketmq_proxy.run(sizes, figures)
    log.info("Kafka broker, workers and proxy stopped")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small counts: a few minutes")
    parser.add_argument(
        "--only",
        choices=("rocketmq", "adapter", "proxy"),
        help="run one side only (the other column stays empty)",
    )
    parser.add_argument(
        "--workloads",
        nargs="+",
        choices=WORKLOADS,
        metavar="WORKLOAD",
        help=f"run only these ({', '.join(WORKLOADS)}); default all",
    )
    parser.add_argument("--simple", type=int, help="SimpleConsumer messages per phase")
    parser.add_argument(
        "--proxies", type=int, default=1, help="proxy processes sharing one port (--reuse-port)"
    )
    parser.add_argument(
        "--proxy-plaintext",
        action="store_true",
        help="the proxy serves plaintext only (--plaintext: gRPC on the port, no TLS front)",
    )
    parser.add_argument("--tx-messages", type=int, help="transactional throughput messages")
    parser.add_argument(
        "--group-commit",
        action="store_true",
        help="transactional topics without direct commits (Kafka transactions, as before)",
    )
    parser.add_argument("--seed-watch", type=float, help="seconds to watch for duplicates")
    parser.add_argument("--seed-runs", type=int, help="seed 004 runs per check interval")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    args = parser.parse_args()
    # SIGTERM unwinds like Ctrl-C, so that every JVM and worker started is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    log.setLevel(logging.DEBUG if args.verbose else logging.INFO)

    if args.group_commit:
        os.environ[GROUP_COMMIT_ENV] = "1"
    sizes = Sizes().quick() if args.quick else Sizes()
    if args.tx_messages:
        sizes = replace(sizes, tx_messages=args.tx_messages)
    if args.seed_watch is not None:
        sizes = replace(sizes, seed_watch_s=args.seed_watch)
    if args.seed_runs:
        sizes = replace(sizes, seed_runs=args.seed_runs)
    if args.simple:
        sizes = replace(sizes, simple=args.simple)
    if args.proxies > 1:
        sizes = replace(sizes, proxies=args.proxies)
    if args.proxy_plaintext:
        sizes = replace(sizes, proxy_plaintext=True)
    if args.workloads:
        sizes = replace(sizes, workloads=tuple(w for w in WORKLOADS if w in args.workloads))
    rmq, ours, proxy = Figures("RocketMQ"), Figures("adapter"), Figures("proxy")
    started = time.monotonic()
    sides: list[tuple[str, Callable[[Sizes, Figures], None], Figures]] = [
        ("rocketmq", run_rocketmq, rmq),
        ("adapter", run_adapter, ours),
        ("proxy", run_proxy, proxy),
    ]
    for name, run, figures in sides:
        if args.only in (None, name):
            load = os.getloadavg()[0]
            figures.notes.append(
                f"{figures.system} side: 1-minute load average {load:.1f} at start"
            )
            run(sizes, figures)
    command = " ".join(["python -m bench.rocketmq", *sys.argv[1:]])
    text = report(sizes, rmq, ours, proxy, command, time.monotonic() - started)
    OUT.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(text)
    print("\n" + text)
    print(f"(also in {REPORT.relative_to(ROOT)})")


if __name__ == "__main__":
    main()
