"""Timer messages at any time: lateness of paced timers, and the forwarder's memory with a
million pending timers.

- paced: timers sent by the 5.x ``Producer`` at ``--rate`` per second for ``--seconds``, each
  due 1 s, 10 s or 60 s after its send (in turn), one forwarder process running. Lateness =
  when a read_committed reader of the real topic receives it - its deliver time. Baseline, same
  run: the same paced sends straight to a topic, latency = receive time - send time.
- pending: ``--pending`` timers (default 1,000,000) due 10 min to 40 days ahead, written to
  their first hop (the records the 5.x producer writes, produced in bulk); then one forwarder
  process starts, and its RSS is read once it has read every partition's head, against the RSS
  of a forwarder with no timers at all.

Run: ``python -m bench.timers [--rate R] [--seconds S] [--pending N]``.
Known gaps: RocketMQ's own timers are not measured here (its timing wheel has a precision of
1 s, ``timerPrecisionMs``).
"""

from __future__ import annotations

import argparse
import random
import subprocess
import threading
import time
import uuid
from pathlib import Path

from adapter import properties as prop
from adapter.delay import DelayLevels
from adapter.hops import HopTable
from adapter.kafka import clients, reading, topics
from adapter.message import Message as WireMessage
from adapter.schedule.envelope import scheduled
from adapter.schedule.plan import SCHEDULE, hop_headers
from adapter.schedule.timer import first_hop
from adapter.v5 import ClientConfiguration, Credentials, Message, Producer
from adapter.wire import codec
from bench.common import ROOT, Table, kafka, new_topic, now_ms, reader_of_new_topic, worker_command
from bench.delay import percentiles

DELAYS_MS = (1_000, 10_000, 60_000)
DAY_MS = 86_400_000


def start_forwarder(bootstrap: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(  # noqa: S603 - fixed argv
        worker_command("schedule", bootstrap, f"bench-{uuid.uuid4().hex[:6]}"), cwd=ROOT
    )


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    process.wait(60)


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def receive_until(
    bootstrap: str, topic: str, n: int, timeout_s: float
) -> list[tuple[int, int, int]]:
    """(receive time, deliver time or CreateTime, the delay in the body) of up to ``n``
    records."""
    reader = reader_of_new_topic(bootstrap, topic)
    got: list[tuple[int, int, int]] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < n and time.monotonic() < deadline:
            records = reading.fetch(reader, 1000, 0.05)
            at = now_ms()
            for r in records:
                if r.error() is None:
                    deliver = dict(r.headers() or ()).get(prop.TIMER_DELIVER_MS)
                    due = int(deliver) if deliver else r.timestamp()[1]
                    got.append((at, due, int(r.value().split(b" ")[0])))
    finally:
        reader.close()
    return got


def paced(bootstrap: str, rate: float, seconds: float, table: Table) -> None:
    n = int(rate * seconds)
    producer = Producer(ClientConfiguration(bootstrap, Credentials()))
    producer.startup()
    try:
        for label, delays in (("direct send (baseline)", (0,)), ("timers", DELAYS_MS)):
            topic = new_topic(bootstrap, 2, prime=True)
            got: list[tuple[int, int, int]] = []
            wait_s = seconds + max(delays) / 1000 + 30
            reader = threading.Thread(
                target=lambda t=topic, w=wait_s, g=got: g.extend(receive_until(bootstrap, t, n, w))
            )
            reader.start()
            time.sleep(2)
            start = time.monotonic()
            for i in range(n):
                time.sleep(max(0.0, start + i / rate - time.monotonic()))
                delay = delays[i % len(delays)]
                message = Message()
                message.topic, message.body = topic, f"{delay} ".encode().ljust(100, b"x")
                if delay:
                    message.delivery_timestamp = now_ms() + delay
                producer.send(message)
            reader.join()
            for delay in delays:
                mine = [received - due for received, due, d in got if d == delay]
                name = f"timer +{delay // 1000} s" if delay else label
                p50, p99, most = percentiles(mine)
                early = sum(1 for late in mine if late < 0) if delay else "-"
                table.add(name, n // len(delays), len(mine), f"{p50:.0f}", f"{p99:.0f}", most,
                          early)  # fmt: skip
    finally:
        producer.shutdown()


def pending(bootstrap: str, count: int, table: Table) -> None:
    forwarder = start_forwarder(bootstrap)
    time.sleep(20)
    empty = rss_mib(forwarder.pid)
    stop(forwarder)
    hops = HopTable.of(DelayLevels.parse())
    raw = clients.producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "acks": "all"})
    message = WireMessage("PendingTimers")
    message.set_body(b"x" * 100)
    rng = random.Random(1)
    start, now = time.monotonic(), now_ms()
    value = codec.encode(scheduled(message, level=0, unique_key="0" * 32, born_ms=now))
    for i in range(count):
        deliver = now + rng.randrange(10 * 60_000, 40 * DAY_MS)
        hop = first_hop(now, deliver, hops)
        assert hop is not None
        headers = hop_headers(f"{i:032X}", deliver, hop.due_ms)
        while True:
            try:
                raw.produce(SCHEDULE, value, partition=hop.partition, headers=headers)
                break
            except BufferError:
                raw.poll(0.1)
    raw.flush(120)
    wrote = time.monotonic() - start
    forwarder = start_forwarder(bootstrap)
    time.sleep(30)  # joined, and every partition's head fetched and paused
    full = rss_mib(forwarder.pid)
    stop(forwarder)
    table.add("forwarder RSS, no timers", "-", "-", f"{empty:.0f} MiB", "-", "-", "-")
    table.add(f"forwarder RSS, {count:,} pending timers (written in {wrote:.0f} s)",
              count, "-", f"{full:.0f} MiB", "-", "-", "-")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rate", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--pending", type=int, default=1_000_000)
    args = parser.parse_args()
    with kafka() as bootstrap:
        topics.init_topics({"bootstrap.servers": bootstrap}, topics.system_layout())
        table = Table("Timer messages, one forwarder process (lateness in ms)")
        forwarder = start_forwarder(bootstrap)
        try:
            paced(bootstrap, args.rate, args.seconds, table)
        finally:
            stop(forwarder)
        if args.pending:
            pending(bootstrap, args.pending, table)
        table.print(("scenario", "sent", "received", "p50", "p99", "max", "early"))


if __name__ == "__main__":
    main()
