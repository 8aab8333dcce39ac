"""A check-back of the coordinator, handed to a live client of the topic on its Telemetry
stream; with none, left to the next check."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from adapter import properties as prop
from adapter.config import KafkaSettings
from adapter.message import ReceivedMessage
from adapter.proxy.config import ProxyConfig
from adapter.proxy.handles import TransactionHandle
from adapter.proxy.metrics import ProxyMetrics
from adapter.proxy.sessions import Session, Sessions
from adapter.proxy.transactions import Transactions
from adapter.transaction.producer import TransactionStatus

pytestmark = pytest.mark.timeout(10)

ID = "0102FC000000012F2E0B18D4E900000008"


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def checked(check_times: int = 2) -> ReceivedMessage:
    """What the check responder hands its checker: the half message at HALF 3@42."""
    return ReceivedMessage(
        topic="Orders",
        kafka_topic="%CHECK%Orders",
        body=b"order 7",
        queue_id=3,
        queue_offset=42,
        timestamp=1_700_000_000_000,
        append_time=False,
        headers=[
            (prop.UNIQ_KEY, ID.encode()),
            (prop.TRANSACTION_CHECK_TIMES, str(check_times).encode()),
        ],
    )


def transactions(sessions: Sessions) -> tuple[Transactions, CollectorRegistry]:
    registry = CollectorRegistry()
    metrics = ProxyMetrics(registry, lambda: 0.0)
    return Transactions(ProxyConfig(KafkaSettings("k:9092")), sessions, metrics), registry


def checks(registry: CollectorRegistry, outcome: str) -> float | None:
    return registry.get_sample_value("rmq_proxy_checks_total", {"outcome": outcome})


def pushed(loop: asyncio.AbstractEventLoop, session: Session) -> list[object]:
    loop.run_until_complete(asyncio.sleep(0))
    found = []
    while not session.outbox.empty():
        found.append(session.outbox.get_nowait())
    return found


def test_a_check_goes_to_a_client_of_its_topic_with_a_handle_naming_the_check(
    loop: asyncio.AbstractEventLoop,
) -> None:
    sessions = Sessions()
    other, client = Session("other", loop), Session("client", loop)
    other.topics.add("Payments")
    client.topics.add("Orders")
    sessions.add(other)
    sessions.add(client)
    checker, registry = transactions(sessions)

    assert checker._check("Orders", checked()) is TransactionStatus.UNKNOWN
    [command] = pushed(loop, client)
    assert pushed(loop, other) == []
    recover = command.recover_orphaned_transaction_command  # type: ignore[attr-defined]
    assert TransactionHandle.decode(recover.transaction_id) == TransactionHandle(3, 42, 2)
    assert recover.message.system_properties.message_id == ID
    assert recover.message.body == b"order 7"
    assert checks(registry, "sent") == 1


def test_with_no_client_of_the_topic_the_check_waits_for_the_next_one(
    loop: asyncio.AbstractEventLoop,
) -> None:
    sessions = Sessions()
    ended = Session("gone", loop)
    ended.topics.add("Orders")
    sessions.add(ended)
    sessions.remove(ended)
    checker, registry = transactions(sessions)
    assert checker._check("Orders", checked()) is TransactionStatus.UNKNOWN
    assert checks(registry, "no_client") == 1
