"""Two proxies share one port, and one is SIGKILLed mid-run: in the middle of a burst of the
official Java client's transactions (its retries reach the other proxy, every committed
transaction is delivered once, none twice, no rollback visible: the check-backs settle what the
dead proxy held); and while four official Python SimpleConsumers receive and ack 5,000 messages
(what it held comes back through the other, every message is acked, none twice)."""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from adapter import naming
from tests.integration.proxy import java
from tests.integration.proxy.conftest import RunningProxy, StartProxy
from tests.integration.proxy.reads import all_records, records_with_ids, uniq
from tests.support import unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.long, pytest.mark.timeout(300)]

BURST = 90


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def serving_the_client(proxies: list[RunningProxy]) -> RunningProxy | None:
    for proxy in proxies:
        if "rmq_proxy_sessions 1.0" in proxy.scrape()[1]:
            return proxy
    return None


def test_a_proxy_killed_mid_burst_loses_no_commit_and_shows_no_rollback(
    start_proxy: StartProxy,
    new_topic,
    start_coordinator,
    system_topics: str,
    tmp_path: Path,
) -> None:
    classpath = java.build()
    topic = new_topic(partitions=2, prefix="JBurst")
    start_coordinator(transaction_timeout_ms=1500, check_interval_ms=3000)
    listen = f"127.0.0.1:{free_port()}"
    proxies = [start_proxy("--reuse-port", listen=listen) for _ in range(2)]
    program = java.JavaProgram(classpath, tmp_path, "burst", listen, topic, str(BURST), "15")

    program.wait_for("DECIDED", count=20, timeout=60)
    victim = wait_until(lambda: serving_the_client(proxies), timeout=10, what="the client's proxy")
    victim.kill()
    program.finish(timeout=180)

    commit: set[str] = set()
    rollback: set[str] = set()
    for message_id, decision in program.words("DECIDED"):
        (commit if decision == "COMMIT" else rollback).add(message_id)
    for index, message_id, _ in program.words("FAILED"):
        if message_id != "null":  # sent: the application decided; the checker says so
            (commit if int(index) % 3 else rollback).add(message_id)
    assert len(commit) >= BURST // 2, program.output()
    survivor = next(p for p in proxies if p is not victim)
    sent_there = 'rmq_proxy_rpcs_total{code="OK",method="SendMessage"}'
    assert sent_there in survivor.scrape()[1], "the client went on through the other proxy"

    kafka_topic = naming.kafka_topic(topic)
    records_with_ids(system_topics, kafka_topic, commit, timeout=90)
    delivered = [uniq(r) for r in all_records(system_topics, kafka_topic, quiet_s=3)]
    assert sorted(delivered) == sorted(commit), (
        f"every commit once, nothing else:\n{program.output()}"
    )
    assert not rollback & set(delivered)


MESSAGES = 5_000
CONSUMERS = 4


def sessions_of(proxy: RunningProxy) -> float:
    for line in proxy.scrape()[1].splitlines():
        if line.startswith("rmq_proxy_sessions "):
            return float(line.split()[1])
    return 0.0


def test_a_proxy_killed_while_four_consumers_ack_loses_no_message_and_acks_none_twice(
    start_proxy: StartProxy, new_topic, kafka_bootstrap: str
) -> None:
    from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

    from adapter.kafka import clients

    topic, group = new_topic(partitions=4, prefix="Failover"), unique("GID_failover")
    producer = clients.producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 20})
    for i in range(MESSAGES):
        producer.produce(naming.kafka_topic(topic), f"m{i}".encode())
    assert producer.flush(60) == 0
    listen = f"127.0.0.1:{free_port()}"
    proxies = [start_proxy("--reuse-port", listen=listen) for _ in range(2)]
    lock = threading.Lock()
    received: Counter[str] = Counter()
    acked: Counter[str] = Counter()
    ack_failed: set[str] = set()
    after_ack: list[str] = []
    failures: Counter[str] = Counter()
    done = threading.Event()

    def consume() -> None:
        consumer = SimpleConsumer(
            ClientConfiguration(listen, Credentials()),
            group,
            {topic: FilterExpression("*")},
            await_duration=2,
        )
        consumer.startup()
        try:
            while not done.is_set():
                try:
                    messages = consumer.receive(32, 10)
                except Exception as exc:  # noqa: BLE001 - the dead proxy's calls fail
                    with lock:
                        failures[f"receive: {type(exc).__name__}"] += 1
                    time.sleep(0.2)
                    continue
                for message in messages:
                    body = message.body.decode()
                    with lock:
                        received[body] += 1
                        if acked[body]:
                            after_ack.append(body)
                    try:
                        consumer.ack(message)
                    except Exception as exc:  # noqa: BLE001 - unknown outcome: checked below
                        with lock:
                            failures[f"ack: {type(exc).__name__}"] += 1
                            ack_failed.add(body)
                        continue
                    with lock:
                        acked[body] += 1
        finally:
            consumer.shutdown()

    def settled() -> bool:
        with lock:
            return len(received) >= MESSAGES and set(received) - set(acked) <= ack_failed

    threads = [threading.Thread(target=consume, daemon=True) for _ in range(CONSUMERS)]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: len(acked) >= MESSAGES // 5, timeout=120, what="a fifth acked")
        victim = max(proxies, key=sessions_of)
        victim.kill()
        wait_until(settled, timeout=200, what="every message received, and acked")
        time.sleep(5)  # a message back after its ack was confirmed would show by now
    finally:
        done.set()
        for thread in threads:
            thread.join(timeout=60)
    redelivered = sum(received.values()) - len(received)
    print(f"redeliveries: {redelivered}; acks of unknown outcome: {len(ack_failed)}; {failures}")
    assert set(received) == {f"m{i}" for i in range(MESSAGES)}, "none lost"
    assert after_ack == [], "no message came back once its ack was confirmed"
    assert {b for b, n in acked.items() if n > 1} == set(), "none acked twice"
    unconfirmed = set(received) - set(acked)
    assert unconfirmed <= ack_failed, "only a message whose ack's answer was lost lacks one"
