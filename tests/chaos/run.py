"""A chaos run: the workload on the three-broker cluster and the workers while the nemesis
injects faults, then the checker over the whole history, a report and a chart.

``python -m tests.chaos`` (``make chaos``) starts its own cluster and runs each fault type
alone for ``--each`` minutes, then ``--mixed`` minutes of faults drawn at random; the exit code
is 1 when anything was lost, duplicated, unexpected, early or out of order, or a worker died by
itself. :func:`run` is the same on a cluster already running (the 3-minute smoke of
``make test-cluster``). Every fault is healed at the end of its window and the run stops by
itself at its deadline.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from adapter import naming
from adapter.config import ENV_DELAY_LEVELS
from adapter.exceptions import AdapterError
from adapter.ops.cli import main as cli
from adapter.wire import codec
from adapter.wire.records import ScheduledMessage
from tests.chaos import report
from tests.chaos.checker import Verdict, check
from tests.chaos.history import Delivery, Fault, History, Kind, Outcome
from tests.chaos.nemesis import FAULTS, Nemesis
from tests.chaos.workers import Workers
from tests.chaos.workload import Workload
from tests.cluster import KafkaCluster, start_cluster
from tests.support import create_topic, read_committed

log = logging.getLogger("chaos")

LEVELS = "1s 1s 1s 2s"
WINDOW_S = (5.0, 15.0)
"""How long a fault stays in place, drawn from this range."""
REST_S = (5.0, 10.0)
"""How long the system runs without a fault between two."""
DRAIN_S = 240.0
"""After the last fault, how long the consumers have to get everything."""


@dataclass
class RunOutcome:
    verdict: Verdict
    report: str
    dead_workers: list[str]

    @property
    def ok(self) -> bool:
        return self.verdict.ok and not self.dead_workers


def run(
    cluster: KafkaCluster,
    schedule: list[tuple[str, float]],
    out: Path,
    seed: int = 0,
) -> RunOutcome:
    """``schedule``: (fault type or ``mixed``, minutes) segments, in order."""
    rng = random.Random(seed)
    os.environ[ENV_DELAY_LEVELS] = LEVELS
    bootstrap = cluster.bootstrap
    init = CliRunner().invoke(cli, ["topics", "init", "--bootstrap", bootstrap])
    if init.exit_code != 0:
        raise RuntimeError(f"topics init failed: {init.output}")
    topic = create_topic(bootstrap, partitions=4, prefix="Chaos")
    fifo_topic = create_topic(bootstrap, partitions=4, prefix="ChaosFifo")
    history = History()
    workers = Workers(bootstrap, {ENV_DELAY_LEVELS: LEVELS})
    nemesis = Nemesis(cluster, workers, rng)
    workload = Workload(bootstrap, topic, fifo_topic, history)
    minutes = sum(m for _, m in schedule)
    try:
        workload.start_consumers()
        workload.start_senders()
        for fault, segment_min in schedule:
            log.info("chaos: %s for %g minutes", fault, segment_min)
            _segment(nemesis, history, fault, segment_min * 60, rng)
        nemesis.heal_all()
        cluster.wait_healthy(timeout=180)
        time.sleep(REST_S[1])  # traffic after the last heal too, so its recovery is timed
        workload.stop_senders()
        _drain(history, workload, topic, fifo_topic)
    finally:
        nemesis.heal_all()
        workload.close()
        dead = workers.dead()
        workers.stop()
        workers.save(out / "workers")
    copies = _audit(bootstrap, history, topic, fifo_topic)
    stored, scheduled_twice = _stored_in_schedule(bootstrap, history)
    consumers = _consumer_groups(topic, fifo_topic)
    groups = {**consumers, "log": topic, "log-fifo": fifo_topic}
    verdict = check(history, groups, redelivery_allowed=tuple(consumers), stored=stored)
    text = report.text(history, verdict, minutes)
    for what, lines in (("written twice", copies), ("stored twice in SCHEDULE", scheduled_twice)):
        if lines:
            text += f"\n{what} (first 20):\n" + "".join(f"  {c}\n" for c in lines[:20])
    if dead:
        text += f"\nworkers that exited by themselves: {', '.join(dead)}\n"
    out.mkdir(parents=True, exist_ok=True)
    (out / "chaos-report.txt").write_text(text)
    report.chart(history, out / "chaos-lateness.png")
    return RunOutcome(verdict, text, dead)


def _segment(
    nemesis: Nemesis, history: History, fault: str, seconds: float, rng: random.Random
) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        chosen = rng.choice(FAULTS) if fault == "mixed" else fault
        started = time.monotonic()
        injected = nemesis.inject(chosen)
        log.info("chaos: %s", injected.name)
        time.sleep(min(rng.uniform(*WINDOW_S), max(0.0, deadline - time.monotonic())))
        injected.heal()
        history.faulted(Fault(injected.name, started, time.monotonic()))
        time.sleep(min(rng.uniform(*REST_S), max(0.0, deadline - time.monotonic())))


def _consumer_groups(topic: str, fifo_topic: str) -> dict[str, str]:
    """The workload's consumer groups (at least once each) and the topic each reads."""
    return {"push": topic, "simple": topic, "fifo": fifo_topic}


def _drain(history: History, workload: Workload, topic: str, fifo_topic: str) -> None:
    """Until every consumer group has every acknowledged message, or ``DRAIN_S``."""
    deadline = time.monotonic() + DRAIN_S
    groups = _consumer_groups(topic, fifo_topic)
    while time.monotonic() < deadline:
        if not check(history, groups, redelivery_allowed=tuple(groups)).lost:
            return
        time.sleep(1.0)
    log.warning("chaos: consumers still missing messages after %.0f s", DRAIN_S)


def _audit(bootstrap: str, history: History, topic: str, fifo_topic: str) -> list[str]:
    """What the topics hold, read_committed: each message there once (groups ``log`` and
    ``log-fifo``), and each FIFO group in order. A record read twice at one place counts once
    (a reader's repeat, not the log's); the places of every message the log holds twice are
    returned, for the report."""
    copies: list[str] = []
    for name, group in ((topic, "log"), (fifo_topic, "log-fifo")):
        expected = sum(
            1
            for op in history.operations
            if op.topic == name and op.outcome is Outcome.OK and op.committed
        )
        places: dict[str, set[tuple[int, int]]] = {}
        for record in read_committed(bootstrap, name, expected, timeout=120):
            key = (record.value() or b"").decode(errors="replace")
            place = (record.partition() or 0, record.offset() or 0)
            if place in places.setdefault(key, set()):
                continue
            places[key].add(place)
            history.delivered(Delivery(key, float("inf"), group))
        copies += [
            f"{name} {key}: partition@offset {', '.join(f'{p}@{o}' for p, o in sorted(at))}"
            for key, at in sorted(places.items())
            if len(at) > 1
        ]
    return copies


def _stored_in_schedule(bootstrap: str, history: History) -> tuple[dict[str, int], list[str]]:
    """How many times each delayed message and timer stored more than once was stored in
    SCHEDULE, and where. A record stored twice by one produce call has the same partition,
    value and headers at two offsets (a forwarder's hop of it differs: another hop due time),
    and a send stamps its value with its own born time, so two sends of one message differ."""
    scheduled = (Kind.DELAY, Kind.TIMER, Kind.RECALL)
    expected = sum(
        1 for op in history.operations if op.kind in scheduled and op.outcome is Outcome.OK
    )
    places: dict[tuple[int, bytes, tuple[object, ...]], set[int]] = {}
    for record in read_committed(bootstrap, naming.SCHEDULE_TOPIC, expected, timeout=120):
        value = record.value() or b""
        identity = (record.partition() or 0, value, tuple(record.headers() or ()))
        places.setdefault(identity, set()).add(record.offset() or 0)
    stored: dict[str, int] = {}
    lines: list[str] = []
    for (partition, value, _), offsets in sorted(places.items()):
        if len(offsets) < 2:
            continue
        try:
            key = codec.decode_as(ScheduledMessage, value).body.decode(errors="replace")
        except AdapterError:
            key = "(undecodable)"
        stored[key] = stored.get(key, 0) + len(offsets)
        lines.append(f"{key}: partition {partition}, offsets {sorted(offsets)}")
    return stored, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--faults", nargs="+", choices=FAULTS, default=list(FAULTS))
    parser.add_argument("--each", type=float, default=2.0, help="minutes of each fault alone")
    parser.add_argument("--mixed", type=float, default=30.0, help="minutes of mixed faults")
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--out", type=Path, default=Path("bench/.out/chaos"))
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    shown = logging.StreamHandler()
    shown.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    log.addHandler(shown)
    log.propagate = False  # the clients' own logging set-up must not swallow the progress
    log.setLevel(logging.INFO)
    schedule = [(f, args.each) for f in args.faults if args.each > 0]
    if args.mixed > 0:
        schedule.append(("mixed", args.mixed))
    log.info("chaos: seed %d, schedule %s", args.seed, schedule)
    with tempfile.TemporaryDirectory(prefix="rmq-chaos-") as certificates:
        cluster = start_cluster(Path(certificates))
        try:
            outcome = run(cluster, schedule, args.out, args.seed)
        finally:
            with contextlib.suppress(Exception):
                cluster.stop()
    print(outcome.report)
    print(f"(also in {args.out / 'chaos-report.txt'}, chart {args.out / 'chaos-lateness.png'})")
    sys.exit(0 if outcome.ok else 1)
