"""The proxy while its Kafka broker is frozen: every other call is still answered, a send gets
an error code by its deadline instead of hanging, and sends go through once Kafka is back."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from adapter.delay import DelayLevels
from adapter.proxy.protocol import Code, definition, service
from tests.brokers import Broker, paused
from tests.integration.proxy.conftest import (
    RunningProxy,
    launch,
    proto_message,
    stop_cleanly,
    stub_of,
)
from tests.support import create_topic, init_system_topics, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def outage_proxy(own_kafka: Broker) -> Iterator[RunningProxy]:
    """A proxy on a broker of this module's own, which the tests freeze."""
    init_system_topics(own_kafka.bootstrap, DelayLevels.parse())
    started = [launch(own_kafka.bootstrap)]
    yield started[0]
    stop_cleanly(started)


def send(stub, topic: str, body: bytes, timeout: float = 30) -> int:  # type: ignore[no-untyped-def]
    request = service.SendMessageRequest(messages=[proto_message(topic, body=body)])
    return int(stub.SendMessage(request, timeout=timeout).entries[0].status.code)


def test_a_send_while_kafka_is_frozen_fails_by_its_deadline_and_other_calls_are_answered(
    own_kafka: Broker, outage_proxy: RunningProxy
) -> None:
    topic = create_topic(own_kafka.bootstrap, partitions=2, prefix="Outage")
    heartbeat = service.HeartbeatRequest(client_type=definition.ClientType.PRODUCER)
    with stub_of(outage_proxy.endpoint) as stub:
        assert send(stub, topic, b"looked up") == Code.OK
        assert send(stub, topic, b"known") == Code.OK  # sent from the event loop itself
        with paused(own_kafka):
            pending = stub.SendMessage.future(
                service.SendMessageRequest(messages=[proto_message(topic, body=b"frozen")]),
                timeout=60,
            )
            for _ in range(3):  # the proxy's loop is not held by the waiting send
                started = time.monotonic()
                assert stub.Heartbeat(heartbeat, timeout=5).status.code == Code.OK
                assert time.monotonic() - started < 5
                time.sleep(0.5)
            answer = pending.result(timeout=30)  # the send timeout (3 s), not a hang
            status = answer.entries[0].status
            assert (status.code, "timed out" in status.message) == (Code.PROXY_TIMEOUT, True)
        wait_until(
            lambda: send(stub, topic, b"back", timeout=10) == Code.OK,
            timeout=60,
            interval=1,
            what="a send to go through once Kafka is back",
        )
