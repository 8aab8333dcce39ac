"""The drop-in client beside raw confluent-kafka, same broker, same run, 100-byte messages.

- send_sync: one acknowledgement per message (raw: produce + flush per message).
- send_oneway: throughput (raw: produce + poll(0), then one flush).
- PushConsumer: throughput with a no-op callback (raw: Consumer.consume batches).
- PushConsumer delivery latency: one stream paced at 200/s (``send_sync`` from one thread),
  read at once by a PushConsumer and by a raw consumer polling one record at a time, each in a
  group of its own; latency = arrival (the callback's start; ``poll`` returning) - the send's
  start, p50 and p99 in ms. The ratio column is raw p99 / adapter p99.

Run: ``make bench`` or ``python -m bench.client [--sync N] [--oneway N] [--consume N]
[--latency N]``.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import uuid

from confluent_kafka import Producer as RawProducer

from adapter.client import ConsumeStatus, Message, Producer, PushConsumer
from adapter.config import KafkaSettings
from adapter.kafka import clients
from adapter.producer.config import ProducerConfig
from bench.common import Table, kafka, new_topic, rate

BODY = b"x" * 100
# The raw baseline sends the same record the adapter sends: the body and RocketMQ's
# properties as headers (a fixed id: generating ids is part of the adapter's own cost).
HEADERS = [("UNIQ_KEY", b"7F0000010D2A41FF838D6D054D980D40"), ("TAGS", b"TagA"), ("KEYS", b"k1")]


def raw_producer(bootstrap: str) -> RawProducer:
    # The same librdkafka settings the adapter uses (acks=all, idempotence, linger 5 ms).
    return clients.producer(ProducerConfig(KafkaSettings(bootstrap), "bench").librdkafka())


def adapter_producer(bootstrap: str) -> Producer:
    producer = Producer("GID_bench")
    producer.set_name_server_address(bootstrap)
    producer.start()
    return producer


def message(topic: str) -> Message:
    m = Message(topic)
    m.set_tags("TagA")
    m.set_keys("k1")
    m.set_body(BODY)
    return m


def bench_sync(bootstrap: str, n: int) -> tuple[float, float]:
    topic = new_topic(bootstrap, 4, "Sync")
    raw = raw_producer(bootstrap)
    raw.produce(topic, BODY)
    raw.flush()
    producer = adapter_producer(bootstrap)
    producer.send_sync(message(topic))
    # Alternate rounds so that broker warm-up and noise fall on both sides alike.
    raw_s = ours_s = 0.0
    rounds = 5
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(n // rounds):
            raw.produce(topic, BODY, headers=HEADERS)
            raw.flush()
        raw_s += time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(n // rounds):
            producer.send_sync(message(topic))
        ours_s += time.perf_counter() - start
    producer.shutdown()
    return rate(n, ours_s), rate(n, raw_s)


def bench_oneway(bootstrap: str, n: int) -> tuple[float, float]:
    topic = new_topic(bootstrap, 4, "Oneway")
    raw = raw_producer(bootstrap)
    raw.produce(topic, BODY)
    raw.flush()
    start = time.perf_counter()
    for _ in range(n):
        while True:
            try:
                raw.produce(topic, BODY, headers=HEADERS)
                break
            except BufferError:
                raw.poll(0.05)
        raw.poll(0)
    raw.flush()
    raw_rate = rate(n, time.perf_counter() - start)

    producer = adapter_producer(bootstrap)
    producer.send_sync(message(topic))
    start = time.perf_counter()
    for _ in range(n):
        producer.send_oneway(message(topic))
    producer.flush(60)
    ours = rate(n, time.perf_counter() - start)
    assert producer.oneway_failures == 0
    producer.shutdown()
    return ours, raw_rate


def fill(bootstrap: str, topic: str, n: int) -> None:
    producer = adapter_producer(bootstrap)
    for _ in range(n):
        producer.send_oneway(message(topic))
    producer.flush(60)
    producer.shutdown()


def bench_consume(bootstrap: str, n: int) -> tuple[float, float]:
    topic = new_topic(bootstrap, 4, "Consume")
    fill(bootstrap, topic, n)

    raw = clients.consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"raw_{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": True,
            "isolation.level": "read_committed",
        }
    )
    raw.subscribe([topic])
    seen, start = 0, 0.0
    while seen < n:
        batch = raw.consume(500, 1.0)
        if batch and not start:
            start = time.perf_counter()
        seen += sum(1 for r in batch if r.error() is None)
    raw_rate = rate(n, time.perf_counter() - start)
    raw.close()

    count = 0
    lock = threading.Lock()
    done = threading.Event()
    first = [0.0]

    def noop(msg) -> ConsumeStatus:  # type: ignore[no-untyped-def]
        nonlocal count
        with lock:
            if not count:
                first[0] = time.perf_counter()
            count += 1
            if count >= n:
                done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(f"GID_bench_{uuid.uuid4().hex[:6]}")
    consumer.set_name_server_address(bootstrap)
    consumer.subscribe(topic, noop)
    consumer.start()
    done.wait(300)
    ours = rate(count, time.perf_counter() - first[0])
    consumer.shutdown()
    return ours, raw_rate


def bench_push_latency(bootstrap: str, n: int, per_second: float = 200) -> tuple[str, str]:
    """(adapter, raw) delivery latency p50 / p99 of one paced stream read by both."""
    topic = new_topic(bootstrap, 4, "Latency")
    lock = threading.Lock()
    ours: dict[int, float] = {}
    raw_seen: dict[int, float] = {}
    sent: dict[int, float] = {}

    def arrived(msg) -> ConsumeStatus:  # type: ignore[no-untyped-def]
        at = time.perf_counter()
        with lock:
            ours.setdefault(int(msg.body), at)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(f"GID_latency_{uuid.uuid4().hex[:6]}")
    consumer.set_name_server_address(bootstrap)
    consumer.subscribe(topic, arrived)
    consumer.start()
    raw = clients.consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"raw_{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    raw.subscribe([topic])
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            record = raw.poll(0.1)
            if record is not None and record.error() is None:
                raw_seen.setdefault(int(record.value() or b"-1"), time.perf_counter())

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    producer = adapter_producer(bootstrap)
    try:
        warm_up = -1  # until both groups have joined and read a message
        deadline = time.monotonic() + 60
        while not (warm_up in ours and warm_up in raw_seen) and time.monotonic() < deadline:
            m = message(topic)
            m.set_body(str(warm_up).encode())
            producer.send_sync(m)
            time.sleep(0.2)
        start = time.perf_counter()
        for i in range(n):
            time.sleep(max(0.0, start + i / per_second - time.perf_counter()))
            m = message(topic)
            m.set_body(str(i).encode())
            sent[i] = time.perf_counter()
            producer.send_sync(m)
        deadline = time.monotonic() + 30
        while (len(ours) < n + 1 or len(raw_seen) < n + 1) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
        poller.join(5)
        raw.close()
        consumer.shutdown()
        producer.shutdown()

    def p50_p99(arrivals: dict[int, float]) -> str:
        waits = [(arrivals[i] - sent[i]) * 1000 for i in sent if i in arrivals]
        if len(waits) < 2:
            return "-"
        q = statistics.quantiles(waits, n=100, method="inclusive")
        return f"{q[49]:.1f} / {q[98]:.1f} ms ({len(waits)} of {n})"

    return p50_p99(ours), p50_p99(raw_seen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sync", type=int, default=3000)
    parser.add_argument("--oneway", type=int, default=200_000)
    parser.add_argument("--consume", type=int, default=200_000)
    parser.add_argument("--latency", type=int, default=2_000)
    args = parser.parse_args()
    table = Table("bench/client.py: drop-in client vs raw confluent-kafka, 100-byte messages")
    with kafka() as bootstrap:
        for name, fn, n in (
            ("send_sync (ack per message)", bench_sync, args.sync),
            ("send_oneway", bench_oneway, args.oneway),
            ("PushConsumer, no-op callback", bench_consume, args.consume),
        ):
            ours, raw = fn(bootstrap, n)
            table.add(name, f"{n:,}", f"{ours:,.0f}", f"{raw:,.0f}", f"{ours / raw:.2f}")
        ours_latency, raw_latency = bench_push_latency(bootstrap, args.latency)
    table.print(("operation", "messages", "adapter msgs/s", "raw msgs/s", "ratio"))
    latency = Table("PushConsumer delivery latency, paced at 200/s: p50 / p99 (arrived of sent)")
    latency.add(f"{args.latency:,}", ours_latency, raw_latency)
    latency.print(("messages", "adapter PushConsumer", "raw consumer, poll()"))


if __name__ == "__main__":
    main()
