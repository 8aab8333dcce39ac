"""The ACL table: applications do what a RocketMQ client does, workers what its broker does."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AclOperation, ResourcePatternType, ResourceType

from adapter import naming
from adapter.ops.acls import bindings, grants

pytestmark = pytest.mark.timeout(10)

APP, WORKER = "User:app", "User:worker"
TABLE = grants(APP, WORKER, topics=["Orders"], producer_groups=["PG"], consumer_groups=["GID"])
HALF = naming.kafka_topic(naming.TRANS_HALF_TOPIC)
END = naming.kafka_topic(naming.TRANS_END_TOPIC)
OP = naming.kafka_topic(naming.TRANS_OP_TOPIC)
SCHEDULE = naming.kafka_topic(naming.SCHEDULE_TOPIC)


def allowed(principal: str, resource: str, name: str) -> set[str]:
    return {
        op
        for g in TABLE
        if g.principal == principal
        and g.resource == resource
        and (name.startswith(g.name) if g.prefixed else name == g.name)
        for op in g.operations
    }


def test_an_application_writes_half_end_and_schedule_but_reads_none_of_them() -> None:
    for topic in (HALF, END, SCHEDULE):
        assert allowed(APP, "topic", topic) == {"WRITE"}


def test_an_application_may_not_touch_op_or_the_parked_topics() -> None:
    for topic in (OP, naming.POISON_TOPIC, naming.TRANS_CHECK_MAX_TIME_TOPIC):
        assert allowed(APP, "topic", naming.kafka_topic(topic)) == set()


def test_an_application_reads_its_topics_and_its_check_topic() -> None:
    assert "READ" in allowed(APP, "topic", "Orders")
    check = naming.kafka_topic(naming.check_topic("PG"))
    assert "READ" in allowed(APP, "topic", check)
    assert allowed(APP, "group", check) == {"READ"}
    assert allowed(APP, "group", "GID") == {"READ"}


def test_only_workers_write_op_and_deliver_to_real_and_retry_topics() -> None:
    assert "WRITE" in allowed(WORKER, "topic", OP)
    assert "WRITE" in allowed(WORKER, "topic", "Orders")
    assert "WRITE" in allowed(WORKER, "topic", naming.kafka_topic(naming.retry_topic("GID")))
    assert allowed(WORKER, "topic", SCHEDULE) == {"READ", "WRITE", "DESCRIBE_CONFIGS"}, (
        "timers hop on; the forwarder checks the stamp type at start"
    )


def test_applications_and_workers_both_read_and_write_the_recall_topic() -> None:
    recalls = naming.kafka_topic(naming.TIMER_RECALL_TOPIC)
    assert allowed(APP, "topic", recalls) == {"READ", "WRITE"}
    assert allowed(WORKER, "topic", recalls) == {"READ", "WRITE"}


def test_bindings_allow_each_operation_and_describe_from_any_host() -> None:
    found = bindings(grants(APP, WORKER, topics=[]))
    half = {b.operation for b in found if b.name == HALF and b.principal == APP}
    assert half == {AclOperation.WRITE, AclOperation.DESCRIBE}
    prefixed = [b for b in found if b.restype == ResourceType.TRANSACTIONAL_ID]
    assert all(b.resource_pattern_type == ResourcePatternType.PREFIXED for b in prefixed)
    assert all(b.host == "*" for b in found)


def test_the_tables_of_several_applications_share_one_set_of_worker_bindings() -> None:
    # One workers' principal serves every application; Kafka refuses a request that names a
    # binding twice ("duplicate ACL bindings not allowed").
    table = grants(APP, WORKER, topics=["Orders"]) + grants("User:b", WORKER, topics=["Stock"])
    made = bindings(table)
    assert len(made) == len(set(made))
    assert {b.name for b in made if b.principal == WORKER} >= {"Orders", "Stock"}
