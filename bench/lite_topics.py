"""Lite topics: the time to subscribe many, the rate they are consumed at, and the consumer's RSS.

One ``LitePushConsumer`` on a 4-partition parent topic subscribes N lite topics (default
10,000); a producer sends M messages to each (default 2), and 1,000 to lite topics nobody
subscribed; the listener counts. Printed: subscribe time, send-to-consumed rate, and the
process's resident memory before the consumer, once subscribed, and at the end (the producer
and the consumer share this process, so the last figure holds both).

Run: ``python -m bench.lite_topics [--lite-topics N] [--per-lite M]``.
Known gaps: one consumer and one producer in one process; the listener does nothing.
"""

from __future__ import annotations

import argparse
import logging
import resource
import threading
import time
from pathlib import Path

from adapter.v5 import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    LitePushConsumer,
    Message,
    MessageListener,
    Producer,
)
from bench.common import Table, kafka, machine, new_topic, rate


def rss_mib() -> float:
    """This process's resident memory now (from /proc), in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Counting(MessageListener):
    def __init__(self) -> None:
        self.count = 0
        self.lock = threading.Lock()

    def consume(self, message: Message) -> ConsumeResult:
        with self.lock:
            self.count += 1
        return ConsumeResult.SUCCESS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lite-topics", type=int, default=10_000)
    parser.add_argument("--per-lite", type=int, default=2)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with kafka() as bootstrap:
        topic = new_topic(bootstrap, 4, "LiteParent")
        config = ClientConfiguration(bootstrap, Credentials())
        before = rss_mib()
        listener = Counting()
        consumer = LitePushConsumer(config, "GID_bench_lite", topic, listener)
        consumer.startup()
        names = [f"agent-{n}" for n in range(args.lite_topics)]
        started = time.monotonic()
        for name in names:
            consumer.subscribe_lite(name)
        subscribe_s = time.monotonic() - started
        subscribed = rss_mib()
        producer = Producer(config, (topic,))
        producer.startup()
        expected = args.lite_topics * args.per_lite
        started = time.monotonic()
        futures = []
        for n in range(args.per_lite):
            for name in names + [f"nobody-{k}" for k in range(1_000)] * (n == 0):
                message = Message()
                message.topic, message.lite_topic, message.body = topic, name, b"%d" % n
                futures.append(producer.send_async(message))
        for future in futures:
            future.result(timeout=120)
        deadline = time.monotonic() + 300
        while listener.count < expected and time.monotonic() < deadline:
            time.sleep(0.05)
        consumed_s = time.monotonic() - started
        end = rss_mib()
        producer.shutdown()
        consumer.shutdown()
    table = Table(f"lite topics, {machine()}")
    table.add("lite topics subscribed", f"{args.lite_topics:,}")
    table.add("subscribe, all of them", f"{subscribe_s:.2f} s")
    table.add("messages consumed (of expected)", f"{listener.count:,} of {expected:,}")
    table.add("send to consumed, msgs/s", f"{rate(listener.count, consumed_s):,.0f}")
    table.add("RSS before the consumer", f"{before:.0f} MiB")
    table.add("RSS once subscribed", f"{subscribed:.0f} MiB")
    table.add("RSS at the end (producer too)", f"{end:.0f} MiB")
    table.print(("what", "figure"))


if __name__ == "__main__":
    main()
