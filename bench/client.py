"""The drop-in client beside raw confluent-kafka, same broker, same run, 100-byte messages.

- send_sync: one acknowledgement per message (raw: produce + flush per message).
- send_oneway: throughput (raw: produce + poll(0), then one flush).
- PushConsumer: throughput with a no-op callback (raw: Consumer.consume batches).

Run: ``make bench`` or ``python -m bench.client [--sync N] [--oneway N] [--consume N]``.
"""

from __future__ import annotations

import argparse
import threading
import time
import uuid

from confluent_kafka import Producer as RawProducer

from adapter.client import ConsumeStatus, Message, Producer, PushConsumer
from adapter.config import KafkaSettings, ProducerConfig
from adapter.kafka import clients
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sync", type=int, default=3000)
    parser.add_argument("--oneway", type=int, default=200_000)
    parser.add_argument("--consume", type=int, default=200_000)
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
    table.print(("operation", "messages", "adapter msgs/s", "raw msgs/s", "ratio"))


if __name__ == "__main__":
    main()
