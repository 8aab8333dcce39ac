"""The 5.x PushConsumer workload of bench/rocketmq.py: send to listener, end to end, paced.

One function for every column, given the client module to use: the official
``rocketmq`` (RocketMQ's column, and the proxy's with only the endpoint changed) or
``adapter.v5`` (the adapter's column, on Kafka directly); the two have the same API. A
``PushConsumer`` with a listener that stamps each message's first arrival is started first and
waited for (one untimed message must come through), then ``n`` messages (100 B, body = index)
are sent at ``pace``/s from 8 threads with ``Producer.send``, each stamped just before its
send; latency = first arrival - send stamp, on the one clock of this machine. The consumer
keeps listening ``linger_s`` after the last arrival, so duplicates would show.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from bench.rocketmq_figures import Latency, body, now_ms
from bench.transactions import run_threads

READY_TIMEOUT_S = 60.0


@dataclass(frozen=True, slots=True)
class Pushed:
    """What the PushConsumer workload measured on one system."""

    sent: int
    received: int
    duplicates: int
    latency: Latency | None

    @property
    def lost(self) -> int:
        return self.sent - self.received


class _Arrivals:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.first: dict[bytes, int] = {}
        self.deliveries = 0

    def saw(self, message_body: bytes) -> None:
        at = now_ms()
        with self.lock:
            self.deliveries += 1
            self.first.setdefault(message_body, at)


def run_push(
    api: ModuleType,
    configuration: Any,
    topic: str,
    group: str,
    n: int,
    pace: float,
    *,
    timeout_s: float = 120.0,
    linger_s: float = 3.0,
) -> Pushed:
    """The workload with ``api``'s Producer and PushConsumer on ``configuration``."""
    arrivals = _Arrivals()

    class Listener(api.MessageListener):  # type: ignore[misc, name-defined]
        def consume(self, message: Any) -> Any:
            arrivals.saw(bytes(message.body))
            return api.ConsumeResult.SUCCESS

    consumer = api.PushConsumer(
        configuration, group, Listener(), {topic: api.FilterExpression("*")}
    )
    consumer.startup()
    producer = api.Producer(configuration, (topic,))
    producer.startup()
    sent_at: dict[bytes, int] = {}
    try:
        ready = body("ready", 0)
        _send(api, producer, topic, ready)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while ready not in arrivals.first:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the push consumer got nothing in {READY_TIMEOUT_S:.0f} s")
            time.sleep(0.05)

        def send(i: int) -> None:
            payload = body("p", i)
            sent_at[payload] = now_ms()
            _send(api, producer, topic, payload)

        sent = run_threads(n, send, deadline_s=n / pace + 60, per_second=pace)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with arrivals.lock:
                if all(b in arrivals.first for b in sent_at):
                    break
            time.sleep(0.05)
        time.sleep(linger_s)
    finally:
        producer.shutdown()
        consumer.shutdown()
    with arrivals.lock:
        first = {b: at for b, at in arrivals.first.items() if b in sent_at}
        deliveries = arrivals.deliveries - 1  # the ready message
    return Pushed(
        sent=sent.count,
        received=len(first),
        duplicates=deliveries - len(first),
        latency=Latency.of([at - sent_at[b] for b, at in first.items()]),
    )


def _send(api: ModuleType, producer: Any, topic: str, payload: bytes) -> None:
    message = api.Message()
    message.topic = topic
    message.body = payload
    message.tag = "TagA"
    producer.send(message)
