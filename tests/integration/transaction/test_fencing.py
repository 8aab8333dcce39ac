"""A coordinator frozen past its session timeout (a zombie) is fenced when it wakes.

SIGSTOP freezes a coordinator mid-stream, holding half partitions and perhaps an open Kafka
transaction; its session (10 s) expires and the other coordinator takes its partitions and
commits what it had not. Woken, the zombie's consumer is out of the group and its transaction
is refused: nothing it had in flight is committed a second time, and it rejoins and works on.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from adapter.client import Message, TransactionStatus
from tests.support import read_committed, unique, wait_until
from tests.workers import ProcessWorker, start_worker

pytestmark = [pytest.mark.timeout(300), pytest.mark.long]

PAUSED_S = 16.0
"""Past the workers' 10 s session timeout, and past their Kafka transaction timeout."""


def decision_of(body: str) -> TransactionStatus:
    """Every third commits, every third rolls back, every third is left to the check-back."""
    return (TransactionStatus.COMMIT, TransactionStatus.ROLLBACK, TransactionStatus.UNKNOWN)[
        int(body[1:]) % 3
    ]


def check_answer(msg: Message) -> TransactionStatus:
    """The check-back commits the even ones it is asked about, rolls back the odd ones."""
    return TransactionStatus.COMMIT if int(msg.body[1:]) % 2 == 0 else TransactionStatus.ROLLBACK


def committed(body: str) -> bool:
    status = decision_of(body)
    return status == TransactionStatus.COMMIT or (
        status == TransactionStatus.UNKNOWN and int(body[1:]) % 2 == 0
    )


def coordinator(bootstrap: str, name: str) -> ProcessWorker:
    worker = start_worker(
        "process",
        *("adapter", "worker", "transactions", "--bootstrap", bootstrap),
        *("--worker-id", unique(name), "--transaction-timeout-ms", "1500"),
        *("--check-interval-ms", "1000"),
    )
    assert isinstance(worker, ProcessWorker)
    worker.wait_for_output("transaction coordinator")
    return worker


def test_a_coordinator_frozen_past_its_session_is_fenced_and_commits_nothing_twice(
    system_topics: str, make_transaction_producer, new_topic, new_group
) -> None:
    topic = new_topic(partitions=2)
    producer = make_transaction_producer(new_group("PG"), check_answer)
    sent = [f"m{i}" for i in range(700)]
    expected = {b for b in sent if committed(b)}

    def send_all() -> None:
        for body in sent:
            msg = Message(topic)
            msg.set_body(body)
            producer.send_message_in_transaction(msg, lambda _m, _a, b=body: decision_of(b))
            time.sleep(0.03)

    zombie = coordinator(system_topics, "zombie")
    survivor = coordinator(system_topics, "survivor")
    sender = threading.Thread(target=send_all)
    sender.start()
    try:
        wait_until(
            lambda: len(read_committed(system_topics, topic, 60, timeout=0.5)) >= 60,
            timeout=90,
            what="commits under way",
        )
        assert sender.is_alive(), "the freeze comes mid-stream"
        woken = zombie.freeze_past_session(PAUSED_S, "lost partitions")
        sender.join(120)
        read_committed(system_topics, topic, len(expected), timeout=150)
        wait_until(
            lambda: zombie.printed_since(woken, "coordinating partitions"),
            timeout=60,
            what="the woken coordinator rejoining with partitions of its own",
        )
        # Everything is in; a copy the zombie still committed would show up now.
        records = read_committed(system_topics, topic, len(expected) + 1, timeout=10)
    finally:
        zombie.resume()
        sender.join(120)
        assert zombie.terminate() == 0, "the woken coordinator stops cleanly"
        assert survivor.terminate() == 0, "the survivor stops cleanly"
    counts = Counter(r.value().decode() for r in records)
    assert set(counts) - expected == set(), "no rolled-back message is ever visible"
    assert expected - set(counts) == set(), "no committed message lost"
    assert [b for b, c in counts.items() if c > 1] == [], "no message twice"
