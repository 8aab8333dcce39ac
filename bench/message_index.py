"""``message query --key`` and ``message show ID`` with and without the Spark message index.

Fills a topic of 4 partitions with N records (raw confluent-kafka, 32-byte bodies, each with a
``UNIQ_KEY``, a random key and a tag, as the adapter's producer writes them), runs
``rmq-adapter spark index --available-now`` over it, then times, as a person runs them (one
``rmq-adapter`` process each, so Python's start is included):

- ``message query --topic T --key K`` by scan, and with ``--index``;
- ``message show ID --topic T`` by scan, and with ``--index``;

for a key and an id near the topic's end (a scan reads the whole window either way). The sizes
are cumulative: the topic is filled to the first size, measured, then filled to the next.

Run: ``python -m bench.message_index [--records 10000000] [--sizes 1000000,10000000]``
(``KAFKA_BOOTSTRAP`` to use a running broker).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer as RawProducer

from adapter.kafka import clients
from bench.common import Table, kafka, machine, new_topic, rate

PARTITIONS = 4
BODY = b"b" * 32


def fill(bootstrap: str, topic: str, start: int, stop: int) -> tuple[str, str]:
    """Records ``start`` to ``stop`` of ``topic``: the id and key of the last one."""
    producer: RawProducer = clients.producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1_000_000,
            "compression.type": "lz4",
            "queue.buffering.max.messages": 1_000_000,
            "acks": 1,
        }
    )
    rng = random.Random(start)
    prefix = uuid.uuid4().hex[:16].upper()
    msg_id = key = ""
    for n in range(start, stop):
        msg_id, key = f"{prefix}{n:016X}", f"k{rng.getrandbits(48):012x}"
        headers = [("UNIQ_KEY", msg_id.encode()), ("KEYS", key.encode()), ("TAGS", b"TagA")]
        while True:
            try:
                producer.produce(topic, BODY, key=None, partition=n % PARTITIONS, headers=headers)
                break
            except BufferError:
                producer.poll(0.05)
        if n % 10_000 == 0:
            producer.poll(0)
    producer.flush(300)
    return msg_id, key


def cli(*args: str) -> tuple[float, str]:
    """Seconds one ``rmq-adapter`` run took, and its output."""
    started = time.perf_counter()
    done = subprocess.run(  # noqa: S603 - fixed argv
        [sys.executable, "-m", "adapter", "--log-level", "WARNING", *args],
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"rmq-adapter {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return seconds, done.stdout


def last_line(output: str) -> str:
    return output.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--sizes", default=None, help="Comma-separated sizes (cumulative).")
    args = parser.parse_args()
    sizes = sorted({int(s) for s in (args.sizes or f"1000000,{args.records}").split(",")})
    sizes = [s for s in sizes if s <= args.records] or [args.records]
    work = Path(tempfile.mkdtemp(prefix="rmq-bench-index-"))
    table = Table(f"message lookups over one topic, with and without the index ({machine()})")
    notes = []
    with kafka() as bootstrap:
        topic = new_topic(bootstrap, PARTITIONS, "Indexed")
        window = ("--begin", "2000-01-01T00:00:00Z", "--timeout", "3000")
        filled = 0
        for size in sizes:
            started = time.perf_counter()
            msg_id, key = fill(bootstrap, topic, filled, size)
            fill_s = time.perf_counter() - started
            filled = size
            index_s, index_out = cli(
                "spark", "index", "--bootstrap", bootstrap, "--topic", topic, "--available-now",
                "--table", str(work / "table"), "--checkpoint", str(work / "checkpoint"),
            )  # fmt: skip
            notes.append(
                f"{size:,} records: filled in {fill_s:.0f} s ({rate(size, fill_s):,.0f}/s), "
                f"index job {index_s:.0f} s: {last_line(index_out)}"
            )
            use_index = ("--index", str(work / "table"))
            runs = {
                "query --key": ("message", "query", "--topic", topic, "--key", key),
                "show ID": ("message", "show", msg_id, "--topic", topic),
            }
            for what, command in runs.items():
                scan_s, scan_out = cli(*command, "--bootstrap", bootstrap, *window)
                index_lookup_s, lookup_out = cli(
                    *command, "--bootstrap", bootstrap, *window, *use_index
                )
                table.add(
                    f"{size:,}", what, f"{scan_s:.2f}", f"{index_lookup_s:.2f}",
                    f"{scan_s / index_lookup_s:.0f}x",
                )  # fmt: skip
                notes.append(f"  {what} by scan: {last_line(scan_out)}")
                notes.append(f"  {what} by index: {last_line(lookup_out)}")
    table.print(("records", "command", "scan s", "index s", "speed-up"))
    print("\n".join(notes))
    if os.environ.get("KEEP_INDEX") is None:
        subprocess.run(["rm", "-rf", str(work)], check=False)  # noqa: S603, S607


if __name__ == "__main__":
    main()
