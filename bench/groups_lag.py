"""Consumer lag at scale: ``groups list``, ``groups lag G`` and the exporter's snapshot over
many groups, beside raw confluent-kafka's own calls.

A local broker; ``--topics`` topics of 4 partitions with a few hundred records each, and
``--groups`` consumer groups, each with offsets committed on every partition of two topics
(``AlterConsumerGroupOffsets``, so no consumer has to run). Then, timed, each several times:

- ``groups list``: every group with its state and members (the command's core,
  :meth:`adapter.ops.groups.Groups.rows`);
- ``groups lag G``: one group's lag per queue (:meth:`Groups.lag`);
- the exporter's snapshot: every group's lag at once (:func:`adapter.ops.exporter.read_snapshot`);
- raw: ``list_consumer_groups`` and one ``list_consumer_group_offsets`` per group.

Run: ``python -m bench.groups_lag [--groups N] [--topics N] [--repeat N]``.
Known gaps: consumer groups only (no share groups, which need a share consumer each); the
broker is local, so the times are the adapter's work and the admin round trips, not a network.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic

from adapter.kafka import clients
from adapter.ops.exporter import read_snapshot
from adapter.ops.groups import Groups
from bench.common import Table, kafka

PARTITIONS = 4
RECORDS_PER_PARTITION = 100


def prepare(bootstrap: str, groups: int, topics: int) -> list[str]:
    """The topics, their records, and ``groups`` groups with committed offsets; the names."""
    admin = clients.admin({"bootstrap.servers": bootstrap})
    names = [f"BenchLag{t}" for t in range(topics)]
    for future in admin.create_topics([NewTopic(n, PARTITIONS) for n in names]).values():
        future.result(60)
    producer = clients.producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for name in names:
        for p in range(PARTITIONS):
            for i in range(RECORDS_PER_PARTITION):
                producer.produce(name, f"m{i}".encode(), partition=p)
    producer.flush(60)
    group_names = [f"GID_BenchLag{g}" for g in range(groups)]
    for g, group in enumerate(group_names):
        read = [names[g % topics], names[(g + 1) % topics]]
        offsets = [
            TopicPartition(topic, p, RECORDS_PER_PARTITION // 2 + g % 10)
            for topic in read
            for p in range(PARTITIONS)
        ]
        commit(admin, group, offsets)
    return group_names


def commit(admin: Any, group: str, offsets: list[TopicPartition], within_s: float = 60.0) -> None:
    """``offsets`` committed for ``group``, asked again while the broker is still loading its
    offsets topic (each partition answers with its own error)."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            request = [ConsumerGroupTopicPartitions(group, offsets)]
            answer = admin.alter_consumer_group_offsets(request)[group].result(10)
            if all(tp.error is None for tp in answer.topic_partitions or []):
                return
        except KafkaException:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"the offsets of {group} were not taken in {within_s:.0f} s")
        time.sleep(0.5)


def timed(call: Callable[[], object], repeat: int) -> tuple[float, float]:
    """p50 and max milliseconds of ``repeat`` calls."""
    spent = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        spent.append((time.perf_counter() - started) * 1000)
    return statistics.median(spent), max(spent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with kafka() as bootstrap:
        print(f"preparing {args.topics} topics and {args.groups} groups...", flush=True)
        group_names = prepare(bootstrap, args.groups, args.topics)
        conf = {"bootstrap.servers": bootstrap}
        groups = Groups(conf, 30.0)
        admin = clients.admin(conf)

        def raw() -> None:
            listed = admin.list_consumer_groups().result(30)
            for row in listed.valid:
                request = [ConsumerGroupTopicPartitions(row.group_id)]
                for future in admin.list_consumer_group_offsets(request).values():
                    future.result(30)

        rows = [
            ("groups list (all groups)", *timed(groups.rows, args.repeat)),
            ("groups lag G (one group)", *timed(lambda: groups.lag(group_names[0]), args.repeat)),
            (
                "exporter snapshot (every group's lag)",
                *timed(lambda: read_snapshot(groups, system_groups=False), args.repeat),
            ),
            ("raw: list groups + each group's offsets", *timed(raw, args.repeat)),
        ]
        snapshot = read_snapshot(groups, system_groups=False)
    table = Table(
        f"bench/groups_lag.py: {args.groups} groups, {args.topics} topics of {PARTITIONS} "
        f"partitions, {args.repeat} runs each"
    )
    for what, p50, most in rows:
        table.add(what, f"{p50:,.0f}", f"{most:,.0f}")
    table.print(("what", "p50 ms", "max ms"))
    print(f"(the snapshot's lag rows: {len(snapshot.accumulation)} group and topic pairs)")


if __name__ == "__main__":
    main()
