"""``rmq-adapter topics init|create``: the system topics, and an application's own topics.

Plays the part of RocketMQ's broker creating its system topics at start (``init``) and of
``mqadmin updateTopic`` (``create``): an application topic with its queue count (partitions;
RocketMQ's ``defaultTopicQueueNums`` is 4); ``create --priorities N`` makes a topic for priority
messages 0 to N-1 (RIP-80; RocketMQ's ``message.type=PRIORITY`` with a queue per priority): the
topic and a Kafka topic per band above 0 (:func:`adapter.naming.priority_topic`), each with
``--partitions``. Both are idempotent: a topic that exists is
reported, not changed, so a script may run them on every deployment; the one change is
``create --direct-commit``, which gives an existing topic the fence direct commits need
(:func:`adapter.transaction.fences.fence_topic`). ``create`` refuses RocketMQ's system topic
names; ``init`` makes those.

Known gaps: ``create`` never adds partitions to an existing topic (a keyed or orderly sender
would see its keys move to other queues).
"""

from __future__ import annotations

import click

from adapter import naming
from adapter.config import KafkaSettings
from adapter.delay import DelayLevels
from adapter.kafka import clients, topics
from adapter.ops.options import bootstrap, clear_errors, delay_levels, option, plural, timeout
from adapter.transaction.fences import fence_topic


@click.group("topics")
def topics_group() -> None:
    """The system topics, and the applications' topics."""


_replication_factor = option(
    "--replication-factor",
    type=click.IntRange(min=1),
    default=None,
    help="Replication factor of new topics (default: 3 on three brokers or more, else 1).",
)


@topics_group.command("init")
@bootstrap
@option(
    "--half-partitions",
    type=click.IntRange(min=1),
    default=None,
    help="Partitions of the HALF, END and OP topics (default: the existing count, else 8).",
)
@_replication_factor
@option(
    "--min-insync-replicas",
    type=click.IntRange(min=1),
    default=None,
    help="min.insync.replicas of new system topics (default: the factor - 1, at least 1).",
)
@option(
    "--allow-under-replicated",
    is_flag=True,
    default=False,
    help="Accept a replication factor below 3 on a cluster of three brokers or more.",
)
@delay_levels
@timeout
@clear_errors
def topics_init(
    bootstrap: str,
    half_partitions: int | None,
    replication_factor: int | None,
    min_insync_replicas: int | None,
    allow_under_replicated: bool,
    delay_levels: str,
    timeout: float,
) -> None:
    """Create the system topics idempotently; refuse layouts that break the rules."""
    levels = DelayLevels.parse(delay_levels)
    conf = KafkaSettings.from_env(bootstrap).librdkafka({})
    metadata = clients.reach(conf, timeout)
    partitions = (
        half_partitions
        or topics.existing_half_partitions(metadata)
        or topics.DEFAULT_HALF_PARTITIONS
    )
    replication = topics.replication_for(
        len(metadata.brokers),
        replication_factor,
        min_insync_replicas,
        allow_under_replicated=allow_under_replicated,
    )
    layout = topics.system_layout(partitions, levels, replication)
    created = topics.init_topics(conf, layout, timeout)
    for spec in layout:
        state = "created" if spec.name in created else "ok"
        shape = plural(spec.partitions, "partition")
        if spec.name in created:
            shape += f", replication {replication.factor}, min ISR {replication.min_insync}"
        click.echo(f"{state:8} {spec.name} ({shape})")


@topics_group.command("create")
@click.argument("name")
@bootstrap
@option(
    "--partitions",
    type=click.IntRange(min=1),
    default=topics.DEFAULT_QUEUES,
    help="Partitions (RocketMQ queues) of the topic.",
    envvar="RMQ_ADAPTER_TOPIC_PARTITIONS",
)
@option(
    "--priorities",
    type=click.IntRange(min=1),
    default=1,
    help="Make it for priority messages 0 to N-1: a Kafka topic per priority above 0.",
    envvar="RMQ_ADAPTER_TOPIC_PRIORITIES",
)
@option(
    "--direct-commit/--no-direct-commit",
    default=False,
    help="Let transactional producers make a COMMIT visible with one append (the topic then "
    "refuses records stamped more than 5 s before the broker's clock); an existing topic "
    "is fenced too.",
    envvar="RMQ_ADAPTER_TOPIC_DIRECT_COMMIT",
)
@_replication_factor
@timeout
@clear_errors
def topics_create(
    name: str,
    bootstrap: str,
    partitions: int,
    priorities: int,
    direct_commit: bool,
    replication_factor: int | None,
    timeout: float,
) -> None:
    """Create the RocketMQ topic NAME unless it exists (as `mqadmin updateTopic`), with a
    Kafka topic for each of its priorities above 0 (--priorities)."""
    naming.sendable_kafka_topic(name)
    conf = KafkaSettings.from_env(bootstrap).librdkafka({})
    brokers = len(clients.reach(conf, timeout).brokers)
    replication = topics.replication_for(brokers, replication_factor, allow_under_replicated=True)
    for band in range(priorities):
        kafka_topic = naming.priority_topic(name, band)
        what = name if band == 0 else f"{name} priority {band}: {kafka_topic}"
        configs = topics.DIRECT_COMMIT if direct_commit else {}
        created, count = topics.create_topic(
            conf, kafka_topic, partitions, replication, timeout, configs
        )
        if created:
            shape = f"{plural(count, 'partition')}, replication {replication.factor}"
            click.echo(f"created  {what} ({shape})")
            continue
        note = "" if count == partitions else f"; not changed to {partitions}"
        if direct_commit and fence_topic(clients.admin(conf), kafka_topic, timeout):
            fence = f"{topics.BEFORE_MAX}={topics.DIRECT_COMMIT[topics.BEFORE_MAX]}"
            note += f"; now fenced for direct commits ({fence})"
        click.echo(f"ok       {what} (exists, {plural(count, 'partition')}{note})")
