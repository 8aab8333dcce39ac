"""The Kafka ACLs of a secured deployment: what applications and workers may do, and nothing more.

Reproduces RocketMQ's split between clients and the broker: in RocketMQ only the broker touches
its half, op and schedule queues (``TransactionalMessageBridge`` writes and reads the half and op
queues, ``ScheduleMessageService`` reads the schedule queues); here the adapter's workers play the
broker, so only they may read HALF, END and SCHEDULE, write OP, the parked topics and the real
topics on behalf of transactions and delays. Applications may write HALF, END and SCHEDULE
(what a RocketMQ client sends to its broker) and their own topics, and read their topics and
their ``%CHECK%`` topic. :func:`grants` is that table, pure; :func:`bindings` turns it into
confluent-kafka's ``AclBinding`` objects for ``AdminClient.create_acls``. docs/production.md
prints it.

Known gaps: the operator's commands (``topics init``, ``status``, ``transactions``) are meant to
run as a Kafka super user or with the workers' principal; they get no grants of their own.
Topics are named literally; a deployment with many may prefer prefixed patterns.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from adapter import naming

__all__ = ["Grant", "grants", "bindings"]

HALF = naming.kafka_topic(naming.TRANS_HALF_TOPIC)
END = naming.kafka_topic(naming.TRANS_END_TOPIC)
OP = naming.kafka_topic(naming.TRANS_OP_TOPIC)
SCHEDULE = naming.kafka_topic(naming.SCHEDULE_TOPIC)
POISON = naming.kafka_topic(naming.POISON_TOPIC)
DISCARDED = naming.kafka_topic(naming.TRANS_CHECK_MAX_TIME_TOPIC)
SCHEMAS = naming.kafka_topic(naming.SCHEMAS_TOPIC)
RECALLS = naming.kafka_topic(naming.TIMER_RECALL_TOPIC)
CHECK_PREFIX = naming.kafka_topic(naming.CHECK_PREFIX)
RETRY_PREFIX = naming.kafka_topic(naming.RETRY_PREFIX)

READ, WRITE, CREATE, DESCRIBE_CONFIGS = "READ", "WRITE", "CREATE", "DESCRIBE_CONFIGS"


@dataclass(frozen=True, slots=True)
class Grant:
    """One line of the table: ``principal`` may do ``operations`` on a resource."""

    principal: str
    resource: str
    """``topic``, ``group`` or ``transactional-id``."""
    name: str
    """A Kafka name; with ``prefixed``, every name that starts with it."""
    operations: tuple[str, ...]
    prefixed: bool = False
    why: str = ""


def grants(
    application: str,
    worker: str,
    *,
    topics: Sequence[str],
    producer_groups: Sequence[str] = (),
    consumer_groups: Sequence[str] = (),
) -> list[Grant]:
    """The table for one application principal and one worker principal (``User:name``);
    ``topics`` are the application's RocketMQ topics, the groups its RocketMQ groups."""
    app = [
        Grant(application, "topic", HALF, (WRITE,), why="half messages"),
        Grant(application, "topic", END, (WRITE,), why="commit or roll back"),
        Grant(application, "topic", SCHEDULE, (WRITE,), why="delayed messages and retries"),
        Grant(application, "topic", SCHEMAS, (READ, WRITE), why="schema evolution"),
        Grant(application, "topic", RECALLS, (READ, WRITE), why="recalls of timers"),
        Grant(application, "group", "rmq-adapter-", (READ,), prefixed=True, why="read-backs"),
        Grant(
            application,
            "transactional-id",
            "rmq-adapter-fast-",
            (WRITE,),
            prefixed=True,
            why="the transactional fast path",
        ),
        Grant(
            application,
            "transactional-id",
            "rmq-adapter-batch-",
            (WRITE,),
            prefixed=True,
            why="the 2.0 Producer's send_batch (one Kafka transaction a batch)",
        ),
    ]
    for topic in topics:
        name = naming.kafka_topic(topic)
        app.append(Grant(application, "topic", name, (READ, WRITE, CREATE), why="its topic"))
    for group in producer_groups:
        check = naming.kafka_topic(naming.check_topic(group))
        app.append(Grant(application, "topic", check, (READ, CREATE), why="check requests"))
        app.append(Grant(application, "group", check, (READ,), why="check requests"))
    for group in consumer_groups:
        for system in (naming.retry_topic(group), naming.dlq_topic(group)):
            name = naming.kafka_topic(system)
            app.append(Grant(application, "topic", name, (READ, WRITE, CREATE), why="retries"))
        app.append(Grant(application, "group", group, (READ,), why="its consumer group"))
    work = [
        Grant(worker, "topic", HALF, (READ, WRITE), why="half messages; resume"),
        Grant(worker, "topic", END, (READ, WRITE), why="decisions; read marks"),
        Grant(worker, "topic", OP, (READ, WRITE), why="op records"),
        Grant(
            worker,
            "topic",
            SCHEDULE,
            (READ, WRITE, DESCRIBE_CONFIGS),
            why="delayed messages; timer hops; its stamp type",
        ),
        Grant(worker, "topic", RECALLS, (READ, WRITE), why="recalls; delivery markers"),
        Grant(worker, "topic", POISON, (READ, WRITE), why="parked records"),
        Grant(worker, "topic", DISCARDED, (READ, WRITE), why="discarded transactions"),
        Grant(worker, "topic", SCHEMAS, (READ, WRITE), why="schema evolution"),
        Grant(worker, "topic", CHECK_PREFIX, (WRITE, CREATE), prefixed=True, why="checks"),
        Grant(worker, "topic", RETRY_PREFIX, (WRITE,), prefixed=True, why="retries"),
        Grant(worker, "group", "CID_RMQ_SYS_", (READ,), prefixed=True, why="its groups"),
        Grant(worker, "group", "rmq-adapter-", (READ,), prefixed=True, why="read-backs"),
        Grant(worker, "transactional-id", "rmq-adapter-", (WRITE,), prefixed=True, why="EOS"),
    ]
    for topic in topics:
        name = naming.kafka_topic(topic)
        work.append(Grant(worker, "topic", name, (WRITE,), why="deliveries"))
    return app + work


_RESOURCES = {
    "topic": ResourceType.TOPIC,
    "group": ResourceType.GROUP,
    "transactional-id": ResourceType.TRANSACTIONAL_ID,
}


def bindings(table: Iterable[Grant]) -> list[AclBinding]:
    """Kafka ACL bindings of the table: each operation allowed from any host, plus DESCRIBE
    on every topic and transactional id named (WRITE and READ imply it in Kafka, CREATE does
    not). Each binding once: the tables of several applications share the workers' rows."""
    out: dict[AclBinding, None] = {}
    for grant in table:
        pattern = ResourcePatternType.PREFIXED if grant.prefixed else ResourcePatternType.LITERAL
        operations = list(grant.operations)
        if grant.resource != "group":
            operations.append("DESCRIBE")
        for operation in dict.fromkeys(operations):
            binding = AclBinding(
                _RESOURCES[grant.resource],
                grant.name,
                pattern,
                grant.principal,
                "*",
                AclOperation[operation],
                AclPermissionType.ALLOW,
            )
            out[binding] = None
    return list(out)
