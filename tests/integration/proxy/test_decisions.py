"""EndTransaction through the proxy on a topic made for direct commits: the decisions it takes
on its event loop (a COMMIT in the direct window) and those it hands to a thread (a COMMIT
after the window, a ROLLBACK), each applied once."""

from __future__ import annotations

import time
from typing import Any

import pytest

from adapter import naming
from adapter.proxy.protocol import Code, definition, service
from tests.integration.proxy.conftest import RunningProxy, proto_message, stub_of
from tests.integration.proxy.reads import all_records, records_with_ids, uniq
from tests.support import DIRECT_COMMIT_2S

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]

TRANSACTION = 4
COMMIT = definition.TransactionResolution.COMMIT
ROLLBACK = definition.TransactionResolution.ROLLBACK


def send_half(stub: Any, topic: str) -> tuple[str, str]:
    """A transactional message sent through the proxy: its message id and transaction id."""
    message = proto_message(topic, body=b"paid", kind=TRANSACTION)
    answer = stub.SendMessage(service.SendMessageRequest(messages=[message]), timeout=30)
    assert answer.status.code == Code.OK, answer.status.message
    entry = answer.entries[0]
    return entry.message_id, entry.transaction_id


def end(stub: Any, topic: str, sent: tuple[str, str], resolution: int) -> None:
    message_id, transaction_id = sent
    request = service.EndTransactionRequest(
        topic=definition.Resource(name=topic),
        message_id=message_id,
        transaction_id=transaction_id,
        resolution=resolution,
        source=definition.TransactionSource.SOURCE_CLIENT,
    )
    answer = stub.EndTransaction(request, timeout=30)
    assert answer.status.code == Code.OK, answer.status.message


def test_commits_in_and_after_the_direct_window_are_delivered_once_and_rollbacks_never(
    proxy: RunningProxy, new_topic, start_coordinator, system_topics: str
) -> None:
    topic = new_topic(partitions=2, prefix="Decided", **DIRECT_COMMIT_2S)
    start_coordinator(transaction_timeout_ms=6000, check_interval_ms=1000)
    with stub_of(proxy.endpoint, {"x-mq-client-id": "decisions-test"}) as stub:
        # The first half starts the topic's producer on a thread; the next ones are built and
        # decided on the event loop.
        on_time = [send_half(stub, topic) for _ in range(12)]
        for sent in on_time:
            end(stub, topic, sent, COMMIT)
        rolled_back = [send_half(stub, topic) for _ in range(3)]
        for sent in rolled_back:
            end(stub, topic, sent, ROLLBACK)
        # Past its direct window (half the fence of 2 s) and before a search of its queue can
        # be final (the fence and 0.5 s of clock skew): a thread sends it as a plain END, and
        # the coordinator holds it until it may search. No client answers checks here.
        late = send_half(stub, topic)
        time.sleep(1.3)
        end(stub, topic, late, COMMIT)
        end(stub, topic, on_time[0], COMMIT)  # a client's retry of a decision: nothing new

    kafka_topic = naming.kafka_topic(topic)
    committed = {message_id for message_id, _ in [*on_time, late]}
    records_with_ids(system_topics, kafka_topic, committed)  # waits for every commit
    delivered = [uniq(r) for r in all_records(system_topics, kafka_topic, quiet_s=3.0)]
    assert sorted(delivered) == sorted(committed), "each commit once, and no rollback"
