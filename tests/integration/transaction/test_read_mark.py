"""The coordinator's check gate on a real broker: a read mark held back by a transaction left
open on END is asked for again, logged and counted, without spinning, and the check comes once
the transaction ends."""

from __future__ import annotations

import logging
import time

import pytest

from adapter import naming
from adapter.client import Message, TransactionStatus
from adapter.kafka import clients
from adapter.transaction.read_mark import MARK_REASK_MS
from tests.support import metric, read_committed, unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

END = naming.kafka_topic(naming.TRANS_END_TOPIC)
HOLD_S = MARK_REASK_MS / 1000 + 4


class Checker:
    """Answers COMMIT, noting when it was asked."""

    def __init__(self) -> None:
        self.asked_at: list[float] = []

    def __call__(self, _msg: object) -> TransactionStatus:
        self.asked_at.append(time.monotonic())
        return TransactionStatus.COMMIT


def test_a_mark_held_back_by_an_open_transaction_is_asked_again_without_spinning(
    system_topics, start_coordinator, make_transaction_producer, new_topic, new_group, caplog
) -> None:
    caplog.set_level(logging.WARNING, logger="adapter.transaction")
    topic = new_topic(partitions=1)
    coordinator = start_coordinator(transaction_timeout_ms=1500, check_interval_ms=1000)
    checker = Checker()
    producer = make_transaction_producer(new_group("PG"), checker)
    message = Message(topic)
    message.set_body(b"held")
    # A transaction another producer left open on the half message's END partition holds
    # every read_committed reader of it, the coordinator's read marks included.
    holder = clients.producer(
        {
            "bootstrap.servers": system_topics,
            "transactional.id": unique("holder"),
            "transaction.timeout.ms": 60_000,
        }
    )
    holder.init_transactions(30)
    sent = producer.send_half(message)
    holder.begin_transaction()
    holder.produce(END, b"not a decision", partition=sent.partition)
    assert holder.flush(30) == 0
    try:
        cpu_before, wall_before = time.process_time(), time.monotonic()
        time.sleep(HOLD_S)  # the check falls due 1.5 s after birth; the mark cannot come back
        cpu_s = time.process_time() - cpu_before
        wall_s = time.monotonic() - wall_before
        reasks = metric(coordinator, "rmq_transactions_mark_reasks_total")
        assert checker.asked_at == [], "no check while a decision may be held back"
    finally:
        holder.abort_transaction(30)
        released = time.monotonic()
    records = read_committed(system_topics, topic, 1, timeout=60)
    assert [r.value() for r in records] == [b"held"]
    assert cpu_s / wall_s < 0.5, f"the process used {cpu_s:.1f} s of CPU in {wall_s:.1f} s"
    assert reasks >= 1, "the mark was asked for again"
    assert "no read mark came back from END partition" in caplog.text
    wait_until(lambda: checker.asked_at, timeout=30, what="the check after the release")
    assert checker.asked_at[0] >= released
