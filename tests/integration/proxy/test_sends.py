"""SendMessage, QueryRoute and RecallMessage through the proxy: batches, routes, FIFO order,
and timers recalled with the official 5.x Python client."""

from __future__ import annotations

import time
from typing import Any

import pytest

from adapter import naming
from adapter.proxy.protocol import Code, definition, service
from adapter.proxy.routes import BROKER_NAME
from tests.integration.proxy.conftest import RunningProxy, proto_message, stub_of
from tests.integration.proxy.reads import all_records, records_with_ids, uniq

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]


@pytest.fixture
def topic(new_topic) -> str:
    return new_topic(partitions=3, prefix="ProxySend")


@pytest.fixture
def official(proxy: RunningProxy) -> Any:
    """A started producer of the official 5.x Python client, on the proxy."""
    from rocketmq import ClientConfiguration, Credentials, Producer

    producer = Producer(ClientConfiguration(proxy.endpoint, Credentials()))
    producer.startup()
    yield producer
    producer.shutdown()


def official_message(topic: str, body: bytes, **fields: Any) -> Any:
    from rocketmq import Message

    message = Message()
    message.topic, message.body = topic, body
    for name, value in fields.items():
        setattr(message, name, value)
    return message


def test_a_batch_gets_a_receipt_per_message_and_the_first_failure_s_code(
    proxy: RunningProxy, topic: str, system_topics: str
) -> None:
    bad = proto_message(topic)
    bad.user_properties["TAGS"] = "not yours"
    good = [proto_message(topic, body=b"one"), proto_message(topic, body=b"two")]
    with stub_of(proxy.endpoint) as stub:
        answer = stub.SendMessage(service.SendMessageRequest(messages=[*good, bad]), timeout=30)
    codes = [entry.status.code for entry in answer.entries]
    assert codes == [Code.OK, Code.OK, Code.ILLEGAL_MESSAGE_PROPERTY_KEY]
    assert answer.status.code == Code.ILLEGAL_MESSAGE_PROPERTY_KEY
    ids = {m.system_properties.message_id for m in good}
    assert [e.message_id for e in answer.entries[:2]] == [
        m.system_properties.message_id for m in good
    ]
    records = records_with_ids(system_topics, naming.kafka_topic(topic), ids)
    assert sorted(r.value() for r in records) == [b"one", b"two"]


def test_a_route_has_a_queue_per_partition_on_the_address_the_client_used(
    proxy: RunningProxy, topic: str
) -> None:
    asked = definition.Endpoints(
        scheme=definition.AddressScheme.DOMAIN_NAME,
        addresses=[definition.Address(host="proxy.example", port=8081)],
    )
    with stub_of(proxy.endpoint) as stub:
        route = stub.QueryRoute(
            service.QueryRouteRequest(topic=definition.Resource(name=topic), endpoints=asked),
            timeout=10,
        )
    assert route.status.code == Code.OK
    assert [q.id for q in route.message_queues] == [0, 1, 2]
    assert {q.broker.name for q in route.message_queues} == {BROKER_NAME}
    assert all(q.broker.endpoints == asked for q in route.message_queues)
    assert all(q.permission == definition.Permission.READ_WRITE for q in route.message_queues)
    # Every type but LITE, and PRIORITY only on a topic made for priorities (the Java client
    # 5.0.x refuses a route naming a type it does not know).
    assert list(route.message_queues[0].accept_message_types) == [
        definition.MessageType.NORMAL,
        definition.MessageType.FIFO,
        definition.MessageType.DELAY,
        definition.MessageType.TRANSACTION,
    ]


def test_one_message_group_s_messages_keep_their_order_in_one_queue(
    official: Any, topic: str, system_topics: str
) -> None:
    sent = [
        official.send(official_message(topic, f"{i}".encode(), message_group="order-7"))
        for i in range(5)
    ]
    records = records_with_ids(
        system_topics, naming.kafka_topic(topic), {r.message_id for r in sent}
    )
    assert len({r.partition() for r in records}) == 1
    assert [r.value() for r in sorted(records, key=lambda r: r.offset())] == [
        b"0", b"1", b"2", b"3", b"4"
    ]  # fmt: skip


def test_a_recalled_timer_is_never_delivered_and_a_bad_handle_is_refused(
    official: Any, topic: str, system_topics: str, start_forwarder
) -> None:
    start_forwarder()
    due_s = int(time.time()) + 3
    recalled = official.send(official_message(topic, b"recalled", delivery_timestamp=due_s))
    kept = official.send(official_message(topic, b"kept", delivery_timestamp=due_s))
    assert recalled.recall_handle
    assert official.recall_message(topic, recalled.recall_handle) == recalled.message_id
    with pytest.raises(Exception, match="40000|BAD_REQUEST|not valid|bad"):
        official.recall_message(topic, "forged-handle")

    kafka_topic = naming.kafka_topic(topic)
    records_with_ids(system_topics, kafka_topic, {kept.message_id}, timeout=60)
    everything = all_records(system_topics, kafka_topic)
    assert [(uniq(r), r.value()) for r in everything] == [(kept.message_id, b"kept")]
