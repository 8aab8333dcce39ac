"""The Spark telemetry job as an operator runs it: wall time and the driver JVM's peak memory of
``rmq-adapter spark telemetry --available-now`` over a couple of thousand rows.

Traffic first, through the adapter with a ``worker all`` process: D delayed messages (two
thirds at level 1, a third at level 2), T timer messages (5.x ``delivery_timestamp`` 1-3 s
ahead: each hops through SCHEDULE a few times) and X transactions (two thirds committed, a
fifth rolled back, the rest committed by the check-back). Then the job runs R times as its own
process (a fresh checkpoint and table each time), as ``rmq-adapter spark telemetry`` does: wall
time from the process's start to its exit, the phases from its log lines (JVM and session up,
the query's batches, the result), and the peak RSS (VmHWM) of its driver JVM, sampled every
0.2 s. The machine's load average is printed beside them: this machine's two cores are shared.

Run: ``python -m bench.spark_telemetry [--delayed D] [--timers T] [--transactions X] [--runs R]``
(defaults 300, 60, 300, 2). ``KAFKA_BOOTSTRAP`` uses an existing broker, else a local broker
process is started and stopped. Logs in ``bench/.out/spark-telemetry/``.
"""

from __future__ import annotations

import argparse
import calendar
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from adapter import v5
from adapter.client import Message, Producer, TransactionMQProducer, TransactionStatus
from adapter.delay import DelayLevels
from adapter.kafka import topics
from bench.common import ROOT, Table, kafka, new_topic, reader_of_new_topic, worker_command

OUT = ROOT / "bench" / ".out" / "spark-telemetry"


def traffic(bootstrap: str, delayed: int, timers: int, transactions: int) -> int:
    """Send the traffic and wait until every message is delivered; how many were."""
    delayed_topic, timer_topic, paid_topic = (
        new_topic(bootstrap, 2, "Reminders"),
        new_topic(bootstrap, 2, "Carts"),
        new_topic(bootstrap, 2, "Paid"),
    )
    producer = Producer(f"PID_{uuid.uuid4().hex[:6]}")
    producer.set_name_server_address(bootstrap)
    producer.start()
    for i in range(delayed):
        message = Message(delayed_topic)
        message.set_body(f"reminder {i}")
        message.set_delay_time_level(1 if i % 3 else 2)
        producer.send_sync(message)
    producer.shutdown()

    config = v5.ClientConfiguration(bootstrap, v5.Credentials())
    timer_producer = v5.Producer(config, (timer_topic,))
    timer_producer.startup()
    for i in range(timers):
        timer = v5.Message()
        timer.topic, timer.body = timer_topic, f"expire cart {i}".encode()
        timer.delivery_timestamp = int(time.time() * 1000) + 1000 + (i % 3) * 1000
        timer_producer.send(timer)
    timer_producer.shutdown()

    def checker(message: Any) -> TransactionStatus:
        return TransactionStatus.COMMIT

    tx = TransactionMQProducer(f"PID_pay_{uuid.uuid4().hex[:6]}", checker)
    tx.set_name_server_address(bootstrap)
    tx.start()
    committed = 0
    for i in range(transactions):
        outcome = (
            TransactionStatus.ROLLBACK
            if i % 5 == 0
            else (TransactionStatus.UNKNOWN if i % 7 == 0 else TransactionStatus.COMMIT)
        )
        committed += outcome is not TransactionStatus.ROLLBACK
        message = Message(paid_topic)
        message.set_body(f"payment {i}")
        tx.send_message_in_transaction(message, lambda _m, _a, o=outcome: o, None)

    expected = {delayed_topic: delayed, timer_topic: timers, paid_topic: committed}
    for topic, count in expected.items():
        reader = reader_of_new_topic(bootstrap, topic)
        seen, deadline = 0, time.monotonic() + 180
        while seen < count and time.monotonic() < deadline:
            seen += sum(1 for r in reader.consume(500, 0.5) if r.error() is None)
        reader.close()
        if seen < count:
            raise RuntimeError(f"{topic}: {seen} of {count} delivered within 180 s")
    tx.shutdown()
    return sum(expected.values())


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _hwm_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def run_job(bootstrap: str, work: Path, run: int) -> dict[str, Any]:
    """``rmq-adapter spark telemetry --available-now`` as its own process: wall time, phases
    from its log, and its driver JVM's peak RSS."""
    state = work / f"run-{run}"
    log_path = OUT / f"telemetry-{run}.log"
    argv = [
        sys.executable, "-m", "adapter", "--log-level", "INFO", "spark", "telemetry",
        "--bootstrap", bootstrap, "--available-now",
        "--checkpoint", str(state / "checkpoint"), "--table", str(state / "table"),
    ]  # fmt: skip
    helped = subprocess.run(  # noqa: S603 - fixed argv
        [*argv[:7], "--help"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if "--json" in helped.stdout:
        argv += ["--json", str(state / "result.json")]
    load = os.getloadavg()[0]
    started = time.monotonic()
    with log_path.open("w") as log:
        process = subprocess.Popen(  # noqa: S603 - fixed argv
            argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ)
        )
        peak = 0.0
        while process.poll() is None:
            for child in _children(process.pid):
                peak = max(peak, _hwm_mb(child))
            time.sleep(0.2)
    wall = time.monotonic() - started
    if process.returncode != 0:
        raise RuntimeError(f"the job failed ({process.returncode}); see {log_path}")
    phases = _phases(log_path.read_text(errors="replace"), started_at=time.time() - wall)
    return {"wall_s": wall, "jvm_peak_mb": peak, "load": load, **phases}


def _phases(text: str, started_at: float) -> dict[str, Any]:
    """Seconds from the process's start to the session, the first and last batch, the end."""
    marks: dict[str, float] = {}
    batches = 0
    rows = None
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or "ts" not in entry:
            continue
        at = calendar.timegm(time.strptime(entry["ts"][:19], "%Y-%m-%dT%H:%M:%S"))
        at += int(entry["ts"][20:23]) / 1000
        msg = entry.get("msg", "")
        if msg == "spark session ready":
            marks.setdefault("session_s", at - started_at)
        elif msg == "telemetry batch merged":
            batches += 1
            marks.setdefault("first_batch_s", at - started_at)
            marks["last_batch_s"] = at - started_at
        elif msg == "telemetry job done":
            marks["done_s"] = at - started_at
            rows = entry.get("input_rows")
    return {**marks, "batches": batches, "input_rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--delayed", type=int, default=300)
    parser.add_argument("--timers", type=int, default=60)
    parser.add_argument("--transactions", type=int, default=300)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="rmq-bench-telemetry-"))
    runs = []
    with kafka() as bootstrap:
        topics.init_topics(
            {"bootstrap.servers": bootstrap}, topics.system_layout(8, DelayLevels.parse())
        )
        with (OUT / "worker.log").open("w") as log:
            worker = subprocess.Popen(  # noqa: S603 - fixed argv
                worker_command(
                    "all", bootstrap, f"bench-{uuid.uuid4().hex[:6]}",
                    "--transaction-timeout-ms", "1000", "--check-interval-ms", "1000",
                ),
                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
            try:
                delivered = traffic(bootstrap, args.delayed, args.timers, args.transactions)
                for run in range(args.runs):
                    runs.append(run_job(bootstrap, work, run))
            finally:
                worker.terminate()
                worker.wait(60)
    shutil.rmtree(work, ignore_errors=True)

    table = Table(
        f"rmq-adapter spark telemetry --available-now ({delivered} messages delivered; "
        f"{args.delayed} delayed, {args.timers} timers, {args.transactions} transactions)"
    )
    for i, r in enumerate(runs):

        def s(key: str, r: dict[str, Any] = r) -> str:
            return f"{r[key]:.1f}" if key in r else "-"

        table.add(
            str(i + 1),
            f"{r['wall_s']:.1f}",
            s("session_s"),
            s("first_batch_s"),
            s("last_batch_s"),
            s("done_s"),
            str(r["batches"]),
            str(r["input_rows"]),
            f"{r['jvm_peak_mb']:,.0f}",
            f"{r['load']:.1f}",
        )
    table.print(
        ("run", "wall s", "session s", "1st batch s", "last batch s", "result s", "batches",
         "rows", "JVM peak MB", "load")
    )  # fmt: skip


if __name__ == "__main__":
    main()
