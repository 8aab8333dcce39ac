"""Auth like RocketMQ's: the official 5.x Python client signs with its Credentials; a good key
sends, a wrong secret is UNAUTHORIZED, a missing permission FORBIDDEN, and no secret shows in
the proxy's output or metrics."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from adapter.proxy.auth import signature
from adapter.proxy.protocol import Code, definition, service
from tests.integration.proxy import java
from tests.integration.proxy.conftest import RunningProxy, StartProxy, proto_message, stub_of

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]

SECRET = "s3cret-of-app"  # noqa: S105 - a test account


@pytest.fixture
def topics(new_topic) -> tuple[str, str]:
    return new_topic(partitions=1, prefix="Allowed"), new_topic(partitions=1, prefix="ReadOnly")


@pytest.fixture
def guarded(start_proxy: StartProxy, topics: tuple[str, str], tmp_path: Path) -> RunningProxy:
    allowed, read_only = topics
    users = tmp_path / "users.toml"
    users.write_text(
        "[[accounts]]\n"
        'accessKey = "app"\n'
        f'secretKey = "{SECRET}"\n'
        f'topicPerms = ["{allowed}=PUB", "{read_only}=SUB"]\n'
    )
    return start_proxy("--users", str(users))


def official_send(endpoint: str, key: str, secret: str, topic: str) -> Any:
    """Send one message with the official client signing as ``key``; its receipt."""
    from rocketmq import ClientConfiguration, Credentials, Message, Producer

    producer = Producer(ClientConfiguration(endpoint, Credentials(key, secret)))
    producer.startup()
    try:
        message = Message()
        message.topic, message.body = topic, b"signed"
        return producer.send(message)
    finally:
        producer.shutdown()


def signed(key: str, secret: str) -> dict[str, str]:
    date = "20261125T120000Z"
    header = (
        f"MQv2-HMAC-SHA1 Credential={key}, SignedHeaders=x-mq-date-time, "
        f"Signature={signature(secret, date)}"
    )
    return {"x-mq-date-time": date, "authorization": header}


def test_a_good_key_sends(guarded: RunningProxy, topics: tuple[str, str], tmp_path: Path) -> None:
    assert official_send(guarded.endpoint, "app", SECRET, topics[0]).message_id


def test_a_wrong_secret_is_unauthorized(guarded: RunningProxy, topics: tuple[str, str]) -> None:
    with pytest.raises(Exception, match="route"):
        official_send(guarded.endpoint, "app", "not-the-secret", topics[0])
    with stub_of(guarded.endpoint, signed("app", "not-the-secret")) as stub:
        answer = stub.SendMessage(
            service.SendMessageRequest(messages=[proto_message(topics[0])]), timeout=10
        )
    assert answer.status.code == Code.UNAUTHORIZED
    with stub_of(guarded.endpoint) as stub:  # no credentials at all
        route = stub.QueryRoute(
            service.QueryRouteRequest(topic=definition.Resource(name=topics[0])), timeout=10
        )
    assert route.status.code == Code.UNAUTHORIZED


def test_a_missing_permission_is_forbidden(guarded: RunningProxy, topics: tuple[str, str]) -> None:
    _, read_only = topics
    with pytest.raises(Exception, match="FORBIDDEN|40300|no PUB"):
        official_send(guarded.endpoint, "app", SECRET, read_only)
    with stub_of(guarded.endpoint, signed("app", SECRET)) as stub:
        answer = stub.SendMessage(
            service.SendMessageRequest(messages=[proto_message(read_only)]), timeout=10
        )
    assert answer.status.code == Code.FORBIDDEN


def test_no_secret_shows_in_the_output_or_the_metrics(
    guarded: RunningProxy, topics: tuple[str, str]
) -> None:
    official_send(guarded.endpoint, "app", SECRET, topics[0])
    with pytest.raises(Exception, match="route"):
        official_send(guarded.endpoint, "app", "wrong-" + SECRET, topics[0])
    assert "auth on (1 access keys)" in guarded.output()
    assert SECRET not in guarded.output()
    assert SECRET not in guarded.scrape()[1]


def test_without_users_auth_is_off_and_the_proxy_says_so(
    proxy: RunningProxy, topics: tuple[str, str]
) -> None:
    assert "auth off" in proxy.output()
    assert official_send(proxy.endpoint, "anyone", "anything", topics[0]).message_id


def test_the_java_client_signs_as_the_proxy_checks_it(
    guarded: RunningProxy, topics: tuple[str, str], tmp_path: Path
) -> None:
    allowed, read_only = topics
    classpath = java.build()
    good = {"RMQ_TEST_ACCESS_KEY": "app", "RMQ_TEST_SECRET_KEY": SECRET}
    program = java.JavaProgram(
        classpath, tmp_path, "sends", guarded.endpoint, allowed, allowed, allowed, env=good
    )
    program.finish()
    assert program.words("SENT NORMAL")
    wrong = {**good, "RMQ_TEST_SECRET_KEY": "not-" + SECRET}
    refused = java.JavaProgram(
        classpath, tmp_path, "sends", guarded.endpoint, allowed, allowed, allowed, env=wrong
    )
    assert refused.wait() != 0
    assert "UnauthorizedException" in refused.output() or "40100" in refused.output()
