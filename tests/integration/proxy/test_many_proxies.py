"""Two proxies behind one application: a message handed out by one is acked, made invisible
for longer or shorter, through the other (a per-call balancer, a channel moved), settled once
by the proxy that holds it, and never acked twice."""

from __future__ import annotations

import time

import pytest

from adapter.proxy.protocol import definition, service
from tests.integration.proxy.conftest import StartProxy, stub_of
from tests.integration.proxy.test_simple_consumer import official_consumer, receive_until, send
from tests.support import unique

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(150)]


def test_an_ack_or_a_change_at_another_proxy_settles_the_message_once(
    start_proxy: StartProxy, new_topic
) -> None:
    first, second = start_proxy(), start_proxy()
    topic, group = new_topic(1, "TwoProxies"), unique("GID_two")
    ids = send(first, topic, [(body, "T") for body in ("a", "b", "c", "d")])
    consumer = official_consumer(first, group, topic)
    try:
        got = {m.body.decode(): m for m in receive_until(consumer, 4, invisible=20)}
        assert all("@127.0.0.1:" in m.receipt_handle for m in got.values()), "names its proxy"

        def entry(body: str) -> service.AckMessageEntry:
            return service.AckMessageEntry(
                message_id=got[body].message_id, receipt_handle=got[body].receipt_handle
            )

        ack = service.AckMessageRequest(
            group=definition.Resource(name=group),
            topic=definition.Resource(name=topic),
            entries=[entry("a"), entry("b")],
        )
        change = service.ChangeInvisibleDurationRequest(
            group=definition.Resource(name=group),
            topic=definition.Resource(name=topic),
            receipt_handle=got["c"].receipt_handle,
            message_id=got["c"].message_id,
        )
        change.invisible_duration.seconds = 1
        with stub_of(second.endpoint) as stub:
            acked = stub.AckMessage(ack, timeout=30)
            again = stub.AckMessage(ack, timeout=30)
            changed = stub.ChangeInvisibleDuration(change, timeout=30)
        assert acked.status.code == definition.Code.OK
        assert [e.status.code for e in acked.entries] == [definition.Code.OK] * 2
        assert [e.status.code for e in again.entries] == [
            definition.Code.INVALID_RECEIPT_HANDLE
        ] * 2
        assert changed.status.code == definition.Code.OK
        [back] = receive_until(consumer, 1, invisible=20)
        assert (back.message_id, back.delivery_attempt) == (ids["c"], 2), "c came back sooner"
        consumer.ack(back)
        consumer.ack(got["d"])
        time.sleep(3)  # an ack that was not taken would bring its message back by now
        assert consumer.receive(16, 20) == [], "a, b acked at the second proxy; c, d at the first"
    finally:
        consumer.shutdown()
