"""The 5.x ``SimpleConsumer`` on three brokers: acks while a partition's leader moves, and lock
ends with the partitions on several brokers.

A topic of three partitions (each broker leads one) is written to steadily while three
threads receive and ack; a fifth of the messages are held (not acked) on their first
delivery, so they come back when their invisible duration ends. Meanwhile the broker that
coordinates the share group, and leads one of the partitions, is stopped (a controlled
shutdown moves its leadership), started again, and given its leadership back by a preferred
election. Nothing may come back before its invisible duration, no ack reported as done may be
followed by another delivery, and every message is delivered and ends acked, or with an ack
that raised and no delivery since (Kafka took it). It prints the leaders, the faults, the
failed acks, librdkafka's dropped ack batches and the held messages Kafka handed out again.
"""

from __future__ import annotations

import itertools
import logging
import sys
import threading
import time
import traceback
import zlib
from dataclasses import dataclass

import pytest
from confluent_kafka import AcknowledgeType, ElectionType, TopicPartition

from adapter import naming
from adapter.kafka import clients
from adapter.producer.routing import java_string_hash
from adapter.v5 import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer
from adapter.v5.exception import ClientException
from tests.cluster import KafkaCluster
from tests.integration.cluster.test_faults import Journal, in_background
from tests.support import create_topic, unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.cluster, pytest.mark.timeout(300)]

INVISIBLE_S = 6.0
PARTITIONS = 3


@dataclass(frozen=True)
class Delivery:
    at: float
    attempt: int | None
    outcome: str
    """``held`` (not acked), ``acked`` (ack returned) or ``refused`` (ack raised)."""


def held_at_first(message_id: str) -> bool:
    return zlib.crc32(message_id.encode()) % 5 == 0


def leader_id(cluster: KafkaCluster, kafka_topic: str, partition: int) -> int:
    """The node id leading the partition now (-1 while it has none), once the metadata has it."""

    def lookup() -> int | None:
        found = cluster.admin().list_topics(kafka_topic, timeout=10).topics.get(kafka_topic)
        if found is None or partition not in found.partitions:
            return None
        return int(found.partitions[partition].leader)

    return int(wait_until(lookup, timeout=30, what="the partition in the metadata"))


def report_stuck(
    journal: Journal, sent: list[str], deliveries: dict[str, list[Delivery]], lock: threading.Lock
) -> None:
    """What never got acked, and where every thread is (a consumer stuck in a Kafka call)."""
    for thread_id, frame in sys._current_frames().items():
        print(f"--- thread {thread_id}\n" + "".join(traceback.format_stack(frame)[-6:]))
    with lock:
        for message_id in sent:
            ds = deliveries.get(message_id, [])
            if not any(d.outcome == "acked" for d in ds):
                seen = [(round(d.at - journal.start, 1), d.attempt, d.outcome) for d in ds]
                number = int(message_id.split("-")[1])
                journal.note(f"not acked: {message_id} (partition {number % PARTITIONS}) {seen}")


def probe(journal: Journal, bootstrap: str, group: str, kafka_topic: str) -> None:
    """What a new share consumer of the group gets meanwhile: whether the records wait at
    the broker (then the consumer's share consumers stopped fetching them) or not."""
    fresh = clients.share_consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit",
        }
    )
    fresh.subscribe([kafka_topic])
    got: list[tuple[int, int, int]] = []
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline and not got:
            for record in fresh.poll(1.0):
                if record.error() is None:
                    got.append((record.partition(), record.offset(), record.delivery_count()))
                    fresh.acknowledge(record, AcknowledgeType.RELEASE)
            if got:
                fresh.commit_sync(10)
    finally:
        fresh.close()
    journal.note(f"a new share consumer of the group got (partition, offset, count): {got[:20]}")


def test_acks_during_leader_moves_and_lock_ends_on_three_brokers_are_never_early_nor_lost(
    cluster: KafkaCluster, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = Journal()
    monkeypatch.setenv("RMQ_ADAPTER_KAFKA_DEBUG", "cgrp")  # librdkafka's dropped ack batches
    caplog.set_level(logging.DEBUG, logger="adapter.librdkafka")
    topic = create_topic(cluster.bootstrap, PARTITIONS, "Shared")
    kafka_topic = naming.kafka_topic(topic)
    leaders = {p: leader_id(cluster, kafka_topic, p) for p in range(PARTITIONS)}
    journal.note(f"leaders of {topic}: {leaders}")
    assert len(set(leaders.values())) == 3, "each broker leads a partition"

    group = unique("GID_shared")
    # Kafka's group coordinator: the leader of the group's __consumer_offsets partition (8 of
    # them on the cluster: offsets.topic.num.partitions).
    coordinator = leader_id(
        cluster, "__consumer_offsets", (java_string_hash(group) & 0x7FFFFFFF) % 8
    )
    [moved] = [p for p, node in leaders.items() if node == coordinator]
    journal.note(f"the group's coordinator is node {coordinator}, which leads {topic}[{moved}]")
    consumer = SimpleConsumer(
        ClientConfiguration(cluster.bootstrap, Credentials()),
        group,
        {topic: FilterExpression()},
        2,
        lock_duration=15,
    )
    consumer.startup()
    deliveries: dict[str, list[Delivery]] = {}
    failures: list[str] = []
    lock = threading.Lock()
    sent: list[str] = []
    producing = threading.Event()
    producing.set()
    done = threading.Event()

    def produce() -> None:
        producer = clients.producer(
            {"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True}
        )
        n = 0
        while producing.is_set():
            message_id = f"m-{n}"
            producer.produce(
                kafka_topic, message_id.encode(), partition=n % PARTITIONS,
                headers=[("UNIQ_KEY", message_id.encode())],
            )  # fmt: skip
            producer.poll(0)
            sent.append(message_id)
            n += 1
            time.sleep(0.15)
        assert producer.flush(60) == 0

    def receive_and_ack() -> None:
        while not done.is_set():
            try:
                got_all = consumer.receive(4, INVISIBLE_S)
            except ClientException as exc:  # a broker going away: the application goes on
                failures.append(f"receive: {exc}")
                continue
            at = time.monotonic()  # each of them became invisible before this
            for got in got_all:
                message_id = str(got.message_id)
                with lock:
                    first = message_id not in deliveries
                if first and held_at_first(message_id):
                    outcome = "held"
                else:
                    try:
                        consumer.ack(got)
                        outcome = "acked"
                    except ClientException as exc:  # it will be delivered again
                        outcome = "refused"
                        failures.append(f"ack: {exc}")
                with lock:
                    deliveries.setdefault(message_id, []).append(
                        Delivery(at, got.delivery_attempt, outcome)
                    )
                time.sleep(0.05)

    def acked() -> int:
        with lock:
            return sum(any(d.outcome == "acked" for d in ds) for ds in deliveries.values())

    def settled_and_quiet() -> bool:
        """Every message's last delivery acked, or its ack failed (Kafka may have taken it),
        and nothing delivered for longer than a lock (an ack Kafka did not take is back by
        then)."""
        with lock:
            last = max((ds[-1].at for ds in deliveries.values()), default=0.0)
            settled = sum(ds[-1].outcome != "held" for ds in deliveries.values())
        return settled >= len(sent) and time.monotonic() - last > 17

    producer = in_background(produce)
    workers = [in_background(receive_and_ack) for _ in range(3)]
    try:
        wait_until(lambda: acked() >= 40, timeout=60, what="40 acks")
        victim = cluster.node(coordinator)
        journal.note(f"stop node {victim.node_id} (coordinator, leader of {topic}[{moved}]) at "
                     f"{acked()} acks")  # fmt: skip
        victim.stop()
        journal.note(f"node {victim.node_id} stopped; {topic}[{moved}] is led by "
                     f"{leader_id(cluster, kafka_topic, moved)}")  # fmt: skip
        time.sleep(5)
        victim.start()
        cluster.wait_healthy([kafka_topic])
        elected = (
            cluster.admin()
            .elect_leaders(
                ElectionType.PREFERRED, [TopicPartition(kafka_topic, p) for p in range(PARTITIONS)]
            )
            .result(timeout=30)
        )
        journal.note(
            f"node {victim.node_id} back; preferred election {[str(e) for e in elected.values()]}"
            f"; {topic}[{moved}] is led by {leader_id(cluster, kafka_topic, moved)} "
            f"at {acked()} acks"
        )
        time.sleep(5)
        producing.clear()
        producer.join(90)
        try:
            wait_until(settled_and_quiet, timeout=120, what="every message settled")
        except AssertionError:
            report_stuck(journal, sent, deliveries, lock)
            probe(journal, cluster.bootstrap, group, kafka_topic)
            raise
    finally:
        done.set()
        for worker in workers:
            worker.join(30)
        consumer.shutdown()

    logged = [r.getMessage() for r in caplog.records]
    dropped = [line for line in logged if "Ack batch" in line and "dropped" in line]
    again = [line for line in logged if "again while it is held" in line]
    held = sum(1 for ds in deliveries.values() if ds[0].outcome == "held")
    journal.note(
        f"{len(sent)} sent, {sum(map(len, deliveries.values()))} deliveries, {held} held at "
        f"first, {len(failures)} acks or receives failed, {len(dropped)} ack batches dropped "
        "locally, "
        f"{len(again)} held messages Kafka handed out again (kept invisible)"
    )
    for reason in sorted(set(failures)):
        journal.note(f"failed: {reason}")
    for line in dropped[:5]:
        journal.note(f"librdkafka: {line}")
    assert sorted(deliveries) == sorted(sent), "every message delivered"
    for message_id, appended in deliveries.items():
        # In the order received: a delivery is appended once its ack returned, and an ack that
        # hangs on a stopped broker and then raises can return after a later delivery's.
        ds = sorted(appended, key=lambda d: d.at)
        outcomes = [(round(d.at - journal.start, 1), d.attempt, d.outcome) for d in ds]
        acks = [i for i, d in enumerate(ds) if d.outcome == "acked"]
        assert acks[:1] in ([], [len(ds) - 1]), f"{message_id} came back after its ack: {outcomes}"
        for before, after in itertools.pairwise(ds):
            if before.outcome == "held":
                back = after.at - before.at
                assert back >= INVISIBLE_S - 0.2, f"{message_id} back after {back:.2f} s"
