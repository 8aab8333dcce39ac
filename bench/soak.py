"""Soak: mixed traffic at a fixed rate for N minutes while a worker is SIGKILLed every 30 s.

Four workers run as their own processes, as in production, with stable worker ids (so a
restarted worker fences its predecessor, as a StatefulSet's pod would): two ``worker schedule``
and two ``worker transactions``. Every ``--kill-every`` seconds one of the two *victims*
(``schedule-b``, ``transactions-b``), chosen at random, is SIGKILLed and started again at once;
its partitions move to the survivor and back. The two *witnesses* (``schedule-a``,
``transactions-a``) are never killed, so their RSS over the whole run shows a leak.

Traffic, round robin at ``--rate`` messages a second, each body a unique id:

- normal: ``Producer.send_sync`` to a real topic;
- delayed: ``send_sync`` at a random level 1-3 (1 s, 5 s, 10 s);
- transactional: ``TransactionMQProducer``; the local transaction commits 3 in 5, rolls back
  1 in 5 and answers UNKNOWN for 1 in 5, which the check-back (after RocketMQ's 6 s
  transaction timeout) commits;
- retried: a ``PushConsumer`` answers RECONSUME_LATER to each message's first delivery, so it
  goes back through SCHEDULE (level 3, 10 s) and ``%RETRY%group``, and accepts the second.

Once the traffic stops and everything due has come, read_committed readers count every id on
each real topic from offset 0. Lost = expected ids never seen; duplicated = extra copies;
leaked = rolled-back ids that were seen. RSS is each worker's VmRSS after the warm-up (the
first minute, while partitions settle) and at the end.

Run: ``python -m bench.soak [--minutes 10] [--rate 20] [--kill-every 30]``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from confluent_kafka import TopicPartition

from adapter import naming
from adapter.client import (
    ConsumeStatus,
    Message,
    Producer,
    PushConsumer,
    TransactionMQProducer,
    TransactionStatus,
)
from adapter.delay import DelayLevels
from adapter.kafka import topics
from bench.common import ROOT, Table, kafka, new_topic, reader_of_new_topic, worker_command

KINDS = ("normal", "delayed", "transactional", "retried")
GROUP = f"SoakGroup_{uuid.uuid4().hex[:6]}"
WARM_UP_S = 60.0


def note(started: float, what: str) -> None:
    print(f"[soak +{time.monotonic() - started:6.1f} s] {what}", flush=True)


class WorkerSlot:
    """One worker process kind and id; ``kill()`` SIGKILLs it and ``start()`` brings it back
    under the same id. Its log (JSON lines, WARNING and up) goes to ``out``."""

    def __init__(self, bootstrap: str, kind: str, name: str, out: Path) -> None:
        self.bootstrap, self.kind, self.name = bootstrap, kind, name
        self.worker_id = f"soak-{name}-{uuid.uuid4().hex[:6]}"
        self.log_path = out / f"{name}.log"
        self.kills = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.rss_after_warm_up_kb: int | None = None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(  # noqa: S603 - fixed argv
                worker_command(self.kind, self.bootstrap, self.worker_id),
                cwd=ROOT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(30)
        self.kills += 1

    def rss_kb(self) -> int:
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> int | None:
        if self.process is None or self.process.poll() is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(30)
            return None

    def problems(self) -> list[str]:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return [line for line in text.splitlines() if '"level": "ERROR"' in line]


class Traffic:
    """The application side: what was sent, and what the consumer accepted."""

    def __init__(self, bootstrap: str) -> None:
        self.topics = {kind: new_topic(bootstrap, 4, f"Soak{kind.title()}") for kind in KINDS}
        self.expected: dict[str, set[str]] = {kind: set() for kind in KINDS}
        self.rolled_back: set[str] = set()
        self.accepted: Counter[str] = Counter()
        self.failed_sends = 0
        self.producer = Producer(f"SoakPID_{uuid.uuid4().hex[:6]}")
        self.producer.set_name_server_address(bootstrap)
        self.producer.start()
        self.transactional = TransactionMQProducer(f"SoakTxPID_{uuid.uuid4().hex[:6]}", self.check)
        self.transactional.set_name_server_address(bootstrap)
        self.transactional.start()
        self.consumer = PushConsumer(GROUP)
        self.consumer.set_name_server_address(bootstrap)
        self.consumer.subscribe(self.topics["retried"], self.consume)
        self.consumer.start()
        self._lock = threading.Lock()

    def check(self, msg: Any) -> TransactionStatus:
        """The application's database: an UNKNOWN answer was a commit after all."""
        committed = msg.body.decode() in self.expected["transactional"]
        return TransactionStatus.COMMIT if committed else TransactionStatus.ROLLBACK

    def consume(self, msg: Any) -> ConsumeStatus:
        if msg.reconsume_times == 0:
            return ConsumeStatus.RECONSUME_LATER
        with self._lock:
            self.accepted[msg.body.decode()] += 1
        return ConsumeStatus.CONSUME_SUCCESS

    def send(self, i: int) -> None:
        kind = KINDS[i % len(KINDS)]
        body = f"{kind}-{i}"
        msg = Message(self.topics[kind])
        msg.set_body(body.encode())
        msg.set_keys(body.encode())
        try:
            if kind == "transactional":
                answer = (
                    TransactionStatus.ROLLBACK
                    if i // 4 % 5 == 3
                    else TransactionStatus.UNKNOWN
                    if i // 4 % 5 == 4
                    else TransactionStatus.COMMIT
                )
                if answer == TransactionStatus.ROLLBACK:
                    self.rolled_back.add(body)
                else:
                    self.expected[kind].add(body)
                self.transactional.send_message_in_transaction(msg, lambda _m, _a: answer, None)
                return
            if kind == "delayed":
                msg.set_delay_time_level(random.randint(1, 3))  # noqa: S311 - not security
            self.producer.send_sync(msg)
            self.expected[kind].add(body)
        except Exception as exc:  # noqa: BLE001 - a failed send is counted, not expected
            self.failed_sends += 1
            self.expected[kind].discard(body)
            print(f"send of {body} failed: {exc}", flush=True)

    def close(self) -> None:
        self.consumer.shutdown()
        self.transactional.shutdown()
        self.producer.shutdown()


def read_ids(bootstrap: str, topic: str) -> Counter[str]:
    """Every body on ``topic`` (a RocketMQ name) that a read_committed reader sees from offset 0
    up to the last stable offset of each partition."""
    kafka_topic = naming.kafka_topic(topic)
    consumer = reader_of_new_topic(bootstrap, topic)
    try:
        partitions = [tp.partition for tp in consumer.assignment()]
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(kafka_topic, p), timeout=10)[1]
            for p in partitions
        }
        seen: Counter[str] = Counter()
        positions = dict.fromkeys(partitions, 0)
        deadline = time.monotonic() + 120
        while any(positions[p] < ends[p] for p in partitions) and time.monotonic() < deadline:
            for record in consumer.consume(500, 0.5):
                if record.error() is None:
                    seen[(record.value() or b"").decode(errors="replace")] += 1
                    positions[record.partition()] = record.offset() + 1
            for tp in consumer.position([TopicPartition(kafka_topic, p) for p in partitions]):
                positions[tp.partition] = max(positions[tp.partition], tp.offset)
        return seen
    finally:
        consumer.close()


def count(traffic: Traffic, bootstrap: str) -> dict[str, dict[str, int]]:
    counts: dict[str, dict[str, int]] = {}
    for kind in KINDS:
        seen = read_ids(bootstrap, traffic.topics[kind])
        expected = traffic.expected[kind]
        duplicated = sum(n - 1 for n in seen.values() if n > 1)
        delivered: set[str] = set(seen)
        if kind == "retried":
            # each message went back through SCHEDULE once: %RETRY% holds it exactly once
            retried = read_ids(bootstrap, naming.retry_topic(GROUP))
            duplicated += sum(n - 1 for n in retried.values() if n > 1)
            delivered = set(traffic.accepted) & set(retried)
        counts[kind] = {
            "expected": len(expected),
            "lost": len(expected - delivered),
            "duplicated": duplicated,
            "leaked": len(traffic.rolled_back & set(seen)),
            "accepted twice": sum(1 for n in traffic.accepted.values() if n > 1)
            if kind == "retried"
            else 0,
        }
    return counts


def soak(bootstrap: str, minutes: float, per_second: float, kill_every: float, out: Path) -> int:
    started = time.monotonic()
    topics.init_topics(
        {"bootstrap.servers": bootstrap},
        topics.system_layout(topics.DEFAULT_HALF_PARTITIONS, DelayLevels.parse()),
    )
    slots = [
        WorkerSlot(bootstrap, "schedule", "schedule-a", out),
        WorkerSlot(bootstrap, "schedule", "schedule-b", out),
        WorkerSlot(bootstrap, "transactions", "transactions-a", out),
        WorkerSlot(bootstrap, "transactions", "transactions-b", out),
    ]
    witnesses, victims = [slots[0], slots[2]], [slots[1], slots[3]]
    for slot in slots:
        slot.start()
    traffic = Traffic(bootstrap)
    note(started, f"4 workers and the application started; logs in {out}")
    t0 = time.monotonic()
    end = t0 + minutes * 60
    next_kill = time.monotonic() + kill_every
    next_report = time.monotonic() + 30
    i = 0
    try:
        while time.monotonic() < end:
            traffic.send(i)
            i += 1
            now = time.monotonic()
            if now - started > WARM_UP_S:
                for slot in slots:
                    if slot.rss_after_warm_up_kb is None and slot.alive():
                        slot.rss_after_warm_up_kb = slot.rss_kb()
            if now >= next_report:
                rss = ", ".join(f"{s.name} {s.rss_kb() / 1024:.0f} MiB" for s in slots if s.alive())
                note(started, f"{i} sent ({i / (now - t0):.1f}/s); RSS: {rss}")
                next_report += 30
            if now >= next_kill:
                victim = random.choice(victims)  # noqa: S311 - not security
                victim.kill()
                victim.start()
                note(started, f"SIGKILLed {victim.name} (kill {victim.kills}); restarted it")
                next_kill += kill_every
            time.sleep(max(0.0, t0 + i / per_second - time.monotonic()))
        note(started, f"traffic stopped after {i} messages; waiting for what is still due")
        wait_for_everything(traffic, started)
        rss_end = {s.name: s.rss_kb() for s in slots if s.alive()}
        counts = count(traffic, bootstrap)
    finally:
        traffic.close()
        codes = {slot.name: slot.stop() for slot in slots}
    return report(slots, witnesses, counts, rss_end, codes, traffic, minutes, per_second)


def wait_for_everything(traffic: Traffic, started: float, timeout: float = 180) -> None:
    """Until the consumer accepted every retried message (the slowest path: a 10 s retry level
    behind a 10 s delay at most) or the deadline; the counts then tell what is missing."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        missing = traffic.expected["retried"] - set(traffic.accepted)
        if not missing:
            break
        time.sleep(1)
    time.sleep(15)  # checks (6 s + interval) and the longest delay level (10 s) come due
    note(started, "drained")


def report(
    slots: list[WorkerSlot],
    witnesses: list[WorkerSlot],
    counts: dict[str, dict[str, int]],
    rss_end: dict[str, int],
    codes: dict[str, int | None],
    traffic: Traffic,
    minutes: float,
    per_second: float,
) -> int:
    table = Table(
        f"Soak: {minutes:g} min at {per_second:g} msg/s, a worker SIGKILLed every 30 s, "
        "counted read_committed"
    )
    for kind, c in counts.items():
        table.add(kind, c["expected"], c["lost"], c["duplicated"], c["leaked"], c["accepted twice"])
    table.print(
        ("traffic", "expected", "lost", "duplicated", "rolled back but seen", "accepted twice")
    )
    memory = Table("Worker memory (VmRSS, MiB): after the first minute and at the end")
    for slot in slots:
        first, last = slot.rss_after_warm_up_kb, rss_end.get(slot.name)
        witness = slot in witnesses
        growth = f"{(last - first) / first * 100:+.1f} %" if witness and first and last else "-"
        role = "witness (never killed)" if witness else f"victim, {slot.kills} kills (restarts)"
        memory.add(
            slot.name,
            role,
            f"{first / 1024:.0f}" if first else "-",
            f"{last / 1024:.0f}" if last else "-",
            growth,
            codes[slot.name],
        )
    memory.print(("worker", "role", "RSS after 1 min", "RSS at end", "growth", "exit on SIGTERM"))
    errors = {slot.name: len(slot.problems()) for slot in slots}
    print(f"\nfailed sends: {traffic.failed_sends}; ERROR lines in worker logs: {errors}")
    bad = sum(c["lost"] + c["duplicated"] + c["leaked"] for c in counts.values())
    print("result:", "0 lost, 0 duplicated, 0 leaked" if bad == 0 else f"{bad} wrong")
    return 1 if bad else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=20.0, help="messages a second, all kinds")
    parser.add_argument("--kill-every", type=float, default=30.0, help="seconds between kills")
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp(prefix="rmq-soak-"))
    with kafka() as bootstrap, contextlib.suppress(KeyboardInterrupt):
        sys.exit(soak(bootstrap, args.minutes, args.rate, args.kill_every, out))


if __name__ == "__main__":
    main()
