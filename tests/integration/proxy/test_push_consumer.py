"""The official 5.x Python client's ``PushConsumer`` (unchanged) consumes through the proxy, as
upstream's ``push_consumer_example`` does: its queue comes from ``QueryAssignment``, every
message arrives, a failed one comes back after its group's first back-off (1 s) with delivery
attempt 2, and nothing acked comes again. ``ForwardMessageToDeadLetterQueue`` moves a held
message to ``%DLQ%<group>`` at once, and its handle is then spent."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from adapter import naming
from adapter.proxy.protocol import definition, service
from tests.integration.proxy.conftest import RunningProxy, stub_of
from tests.integration.proxy.test_simple_consumer import official_consumer, receive_until, send
from tests.support import read_committed, unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(150)]


@contextlib.contextmanager
def official_push_consumer(
    proxy: RunningProxy, group: str, topic: str, consume: Callable[[Any], bool], tag: str = "*"
) -> Iterator[None]:
    """The official ``PushConsumer`` through ``proxy``, its listener answering SUCCESS when
    ``consume(message)`` is true, FAILURE otherwise; shut down afterwards."""
    from rocketmq import (
        ClientConfiguration,
        ConsumeResult,
        Credentials,
        FilterExpression,
        MessageListener,
        PushConsumer,
    )

    class Listener(MessageListener):  # type: ignore[misc]
        def consume(self, message: Any) -> Any:
            return ConsumeResult.SUCCESS if consume(message) else ConsumeResult.FAILURE

    consumer = PushConsumer(
        ClientConfiguration(proxy.endpoint, Credentials()),
        group,
        Listener(),
        {topic: FilterExpression(tag)},
    )
    consumer.startup()
    try:
        yield
    finally:
        consumer.shutdown()


def test_a_push_consumer_gets_every_message_and_a_failed_one_again_with_attempt_two(
    proxy: RunningProxy, new_topic
) -> None:
    topic, group = new_topic(2, "Push"), unique("GID_push")
    bodies = [f"m{i}" for i in range(20)]
    ids = send(proxy, topic, [(body, "TagA") for body in bodies])
    lock = threading.Lock()
    attempts: dict[str, list[int]] = {}
    acked: Counter[str] = Counter()
    seen_ids: dict[str, str] = {}

    def consume(message: Any) -> bool:
        body = message.body.decode()
        with lock:
            attempts.setdefault(body, []).append(message.delivery_attempt)
            if body == "m7" and message.delivery_attempt == 1:
                return False
            seen_ids[body] = message.message_id
            acked[body] += 1
        return True

    with official_push_consumer(proxy, group, topic, consume, "TagA"):
        wait_until(lambda: set(acked) == set(bodies), timeout=90, what="every message consumed")
        time.sleep(3)  # an acked message would be back by now if its ack had been lost
    assert dict(acked) == dict.fromkeys(bodies, 1), "each consumed successfully once"
    assert seen_ids == ids, "each with the id its send returned"
    assert attempts["m7"] == [1, 2], "the failed one came back once, with attempt 2"
    assert all(attempts[b] == [1] for b in bodies if b != "m7")


@pytest.mark.long  # fifteen seconds: every attempt of a failing message
def test_a_message_forwarded_to_the_dead_letter_queue_lands_there_and_its_handle_is_spent(
    proxy: RunningProxy, new_topic, kafka_bootstrap: str
) -> None:
    topic, group = new_topic(1, "Forward"), unique("GID_forward")
    ids = send(proxy, topic, [("doomed", "TagA")])
    consumer = official_consumer(proxy, group, topic)
    try:
        [message] = receive_until(consumer, 1)
        request = service.ForwardMessageToDeadLetterQueueRequest(
            group=definition.Resource(name=group),
            topic=definition.Resource(name=topic),
            receipt_handle=message.receipt_handle,
            message_id=message.message_id,
            delivery_attempt=16,
            max_delivery_attempts=16,
        )
        with stub_of(proxy.endpoint) as stub:
            first = stub.ForwardMessageToDeadLetterQueue(request, timeout=30)
            again = stub.ForwardMessageToDeadLetterQueue(request, timeout=30)
        assert first.status.code == definition.Code.OK
        assert again.status.code == definition.Code.INVALID_RECEIPT_HANDLE
        dlq = naming.dlq_topic(group)

        def dead_letters() -> list[Any]:
            return list(read_committed(kafka_bootstrap, dlq, 1, timeout=5))

        wait_until(dead_letters, timeout=60, what="the dead letter")
        [letter] = dead_letters()
        headers = {k: v for k, v in letter.headers() or []}
        assert letter.value() == b"doomed"
        assert headers["UNIQ_KEY"].decode() == ids["doomed"]
        assert b"forwarded by the client after 16 deliveries" in headers["rmq.dlq_reason"]
        time.sleep(2)
        assert consumer.receive(16, 20) == [], "settled: it does not come back to the group"
    finally:
        consumer.shutdown()
