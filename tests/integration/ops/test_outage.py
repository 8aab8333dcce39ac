"""A broker outage under load, as an operator sees it: `worker all` running, transactions being
sent, the broker stopped for 20 s and started again. The same worker process heals; every
committed message arrives once; the gauges stay true while Kafka is away; the logs stay quiet;
and SIGTERM stops the worker even while Kafka is away."""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Iterator

import pytest
from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import OffsetSpec

from adapter import naming
from adapter.client import Message, TransactionMQProducer, TransactionStatus
from adapter.delay import DelayLevels
from adapter.exceptions import ProducerSendSyncFailed
from adapter.kafka import clients
from adapter.ops import broker as local_broker
from tests.brokers import Broker
from tests.support import create_topic, init_system_topics, read_committed, unique, wait_until
from tests.workers import ProcessWorker, start_worker

pytestmark = [pytest.mark.kafka, pytest.mark.long, pytest.mark.timeout(300)]

OUTAGE_S = float(os.environ.get("RMQ_TEST_OUTAGE_S", "60"))
"""Long enough that the coordinator drops its partitions (30 s of failed turns) and its
consumer's session ends: its gauges must stay true all the same."""


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:  # noqa: S310
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return 0, ""  # not listening yet


def gauge(port: int, name: str) -> float:
    _, text = get(port, "/metrics")
    [line] = [line for line in text.splitlines() if line.startswith(name + " ")]
    return float(line.split()[1])


def held_open(bootstrap: str) -> list[str]:
    """Every partition of the broker whose last stable offset is short of its end: where an
    open transaction keeps read_committed readers waiting (``topic[p] LSO of end``)."""
    admin = clients.admin({"bootstrap.servers": bootstrap})
    partitions = [
        TopicPartition(name, p)
        for name, topic in admin.list_topics(timeout=10).topics.items()
        for p in topic.partitions
    ]

    def latest(isolation: IsolationLevel) -> dict[tuple[str, int], int]:
        asked = admin.list_offsets(
            {tp: OffsetSpec.latest() for tp in partitions},
            isolation_level=isolation,
            request_timeout=10,
        )
        return {(tp.topic, tp.partition): f.result().offset for tp, f in asked.items()}

    stable, ends = latest(IsolationLevel.READ_COMMITTED), latest(IsolationLevel.READ_UNCOMMITTED)
    return [
        f"{t}[{p}] {stable[t, p]} of {end}" for (t, p), end in ends.items() if stable[t, p] < end
    ]


def written_bodies(bootstrap: str, topic: str) -> list[str]:
    """Every body in ``topic``, read_uncommitted: a body here that a read_committed reader
    does not see sits behind a transaction still open."""
    reader = clients.consumer(
        {"bootstrap.servers": bootstrap, "group.id": unique("uncommitted"),
         "isolation.level": "read_uncommitted", "enable.auto.commit": False}
    )  # fmt: skip
    try:
        kafka_topic = naming.kafka_topic(topic)
        partitions = reader.list_topics(kafka_topic, timeout=10).topics[kafka_topic].partitions
        reader.assign([TopicPartition(kafka_topic, p, 0) for p in partitions])
        bodies, deadline = [], time.monotonic() + 10
        while time.monotonic() < deadline:
            records = reader.consume(500, 0.5)
            bodies += [r.value().decode() for r in records if r.error() is None]
            if not records:
                break
        return bodies
    finally:
        reader.close()


@pytest.fixture
def worker_all(own_kafka: Broker) -> Iterator[tuple[ProcessWorker, int]]:
    init_system_topics(own_kafka.bootstrap, DelayLevels.parse())
    port = local_broker.free_port_pair()
    worker = start_worker(
        "process",
        *("adapter", "worker", "all", "--bootstrap", own_kafka.bootstrap),
        *("--metrics-port", str(port), "--worker-id", unique("outage")),
        *(
            "--transaction-timeout-ms",
            "2000",
            "--check-interval-ms",
            "2000",
            # 15 checks 2 s apart would leave the held transactions 30 s in all, the outage
            # included; RocketMQ's defaults (60 s apart) leave 15 minutes. On a loaded machine a
            # producer's check consumer has been seen to take over 20 s to rejoin after the
            # broker's restart: give the checks a budget in proportion.
            "--check-max",
            "60",
            "--stop-timeout",
            "20",
        ),
    )
    assert isinstance(worker, ProcessWorker)
    try:
        wait_until(lambda: get(port, "/readyz")[0] == 200, timeout=90, what="the workers ready")
        assert get(port, "/healthz") == (200, "ok\n")
        yield worker, port
    finally:
        if worker.process.poll() is None:
            worker.kill()


def test_a_broker_outage_ends_with_every_commit_visible_once_from_the_same_worker(
    own_kafka: Broker, worker_all: tuple[ProcessWorker, int]
) -> None:
    worker, port = worker_all
    topic = create_topic(own_kafka.bootstrap, partitions=2)
    committed: set[str] = set()
    held = {f"held-{i}" for i in range(5)}
    settle = threading.Event()
    asked: list[tuple[float, str]] = []  # when the producer was asked about a held one

    def checker(msg) -> TransactionStatus:  # type: ignore[no-untyped-def]
        """The application's database: what it committed, and the held ones once settled."""
        body = msg.body.decode()
        if body in held:
            asked.append((time.monotonic(), body))
        if body in committed or (body in held and settle.is_set()):
            return TransactionStatus.COMMIT
        return TransactionStatus.UNKNOWN if body in held else TransactionStatus.ROLLBACK

    producer = TransactionMQProducer(unique("PG"), checker)
    producer.set_name_server_address(own_kafka.bootstrap)
    producer.start()
    stop_sending = threading.Event()
    failed_sends = 0

    def commit_locally(msg, _args) -> TransactionStatus:  # type: ignore[no-untyped-def]
        committed.add(msg.body.decode())
        return TransactionStatus.COMMIT

    def send_five_a_second() -> None:
        nonlocal failed_sends
        n = 0
        while not stop_sending.wait(0.2):
            message = Message(topic)
            message.set_body(f"tx-{n}")
            n += 1
            try:
                producer.send_message_in_transaction(message, commit_locally)
            except ProducerSendSyncFailed:
                failed_sends += 1  # no half message: nothing was committed, nothing to deliver

    try:
        for body in sorted(held):
            message = Message(topic)
            message.set_body(body)
            producer.send_message_in_transaction(message, lambda m, a: TransactionStatus.UNKNOWN)
        wait_until(lambda: gauge(port, "rmq_transactions_pending") >= 5, timeout=60, what="pending")
        sender = threading.Thread(target=send_five_a_second)
        sender.start()
        wait_until(lambda: len(committed) >= 20, timeout=60, what="traffic before the outage")

        lines_before = len(worker.lines)
        own_kafka.down()
        went_down = time.monotonic()
        ages, pending, ready, stale = [], [], [], []
        while time.monotonic() - went_down < OUTAGE_S:
            pending.append(gauge(port, "rmq_transactions_pending"))
            ages.append(gauge(port, "rmq_transactions_oldest_pending_age_seconds"))
            stale.append(gauge(port, "rmq_transactions_gauges_stale"))
            ready.append(get(port, "/readyz")[0])
            time.sleep(1)
        own_kafka.up()
        came_back = time.monotonic()
        outage_lines = worker.lines[lines_before:]
        # Once ready again, the gauges are current: never 200 while they still are stale.
        after: list[tuple[int, float, float]] = []
        why_not_ready: Counter[str] = Counter()

        def ready_again() -> bool:
            code, body = get(port, "/readyz")
            after.append(
                (
                    code,
                    gauge(port, "rmq_transactions_gauges_stale"),
                    gauge(port, "rmq_transactions_pending"),
                )
            )
            if code != 200:
                why_not_ready[body.strip()] += 1
            return code == 200

        try:
            wait_until(ready_again, timeout=120, interval=0.5, what="ready after the outage")
        except AssertionError:
            print("[not ready, /readyz said]", dict(why_not_ready))
            for line in worker.lines[lines_before:]:
                print("[worker]", line.strip()[:400])
            print("[held open by a transaction]", held_open(own_kafka.bootstrap))
            raise
        print(
            f"\n[outage] broker down {came_back - went_down:.1f} s; {len(outage_lines)} log lines"
        )
        print(f"[outage] pending gauge {pending}; oldest age {ages}; /readyz {ready}")
        print(f"[outage] stale {stale}; after the return (/readyz, stale, pending) {after}")
        for line in outage_lines:
            print("[outage log]", line.strip()[:300])

        assert min(pending) >= 5, "the held transactions stay counted while Kafka is away"
        assert ages == sorted(ages), "their age keeps growing"
        assert ages[-1] > ages[0]
        assert 503 in ready, "not ready while Kafka is away"
        assert 1.0 in stale, "the gauges said they were the last known ones"
        assert all(code != 200 or flag == 0.0 for code, flag, _ in after), "ready means current"
        assert after[-1][2] >= 5, "the held transactions still pending, counted for real"
        assert len(outage_lines) <= 8, "".join(outage_lines)

        settle.set()
        time.sleep(3)  # traffic after the broker's return
        stop_sending.set()
        sender.join(30)
        expected = committed | held
        records = read_committed(own_kafka.bootstrap, topic, len(expected), timeout=120)
        settled = time.monotonic() - came_back - 2.0  # read_committed waits 2 s for extras
        print(
            f"[outage] {len(expected)} committed ({failed_sends} sends refused while down); all "
            f"visible {settled:.1f} s after the broker's return"
        )
    finally:
        stop_sending.set()
        producer.shutdown()
    counts = Counter(r.value().decode() for r in records)
    if set(counts) != expected:
        for line in worker.lines[lines_before:]:
            print("[after]", line.strip()[:400])
        print(
            "[missing]", sorted(expected - set(counts)), "[extra]", sorted(set(counts) - expected)
        )
        print("[asked, s after the return]", [(round(t - came_back, 1), b) for t, b in asked])
        print("[pending now]", gauge(port, "rmq_transactions_pending"))
        print("[written, committed or not]", sorted(written_bodies(own_kafka.bootstrap, topic)))
        print("[held open by a transaction]", held_open(own_kafka.bootstrap))
    assert set(counts) == expected, "nothing lost, nothing rolled back delivered"
    assert [b for b, c in counts.items() if c > 1] == [], "nothing twice"
    assert worker.process.poll() is None, "the same worker process healed"
    logged = [json.loads(line) for line in worker.lines if line.startswith("{")]
    assert any(own_kafka.bootstrap in entry["msg"] for entry in logged), "it named the address"
    assert worker.terminate(timeout=60) == 0


def test_sigterm_while_kafka_is_away_stops_the_worker_within_its_stop_timeout(
    own_kafka: Broker, worker_all: tuple[ProcessWorker, int]
) -> None:
    worker, _ = worker_all
    own_kafka.down()
    try:
        time.sleep(5)  # the workers are mid-turn against a broker that is gone
        code = worker.terminate(timeout=20 + 15)  # --stop-timeout 20, then the process exits
    finally:
        own_kafka.up()
    assert code in (0, 1), "stopped by the signal, cleanly or past its stop timeout"
    assert not any("Traceback" in line for line in worker.lines)
