"""``rmq-adapter transactions list`` against a coordinator: filters, JSON, and what became of a
transaction an operator resumed (committed, rolled back, or pending again)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner

from adapter.client import Message, TransactionStatus
from adapter.ops.cli import main as cli
from tests.support import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

FAST = {"transaction_timeout_ms": 1500, "check_interval_ms": 1000, "check_max": 2}


class Checker:
    """A checker whose answer per message key an operator's fix changes."""

    def __init__(self) -> None:
        self.answers: dict[str, TransactionStatus] = {}

    def __call__(self, msg: Any) -> TransactionStatus:
        return self.answers.get(msg.keys.decode(), TransactionStatus.UNKNOWN)


def listed(bootstrap: str, *args: str) -> dict[str, Any]:
    done = CliRunner().invoke(
        cli, ["transactions", "list", "--json", "--bootstrap", bootstrap, *args]
    )
    assert done.exit_code == 0, done.output
    return {row["transaction_id"]: row for row in json.loads(done.stdout)["transactions"]}


def send(producer: Any, topic: str, key: str) -> str:
    msg = Message(topic)
    msg.set_keys(key)
    msg.set_body(f"order {key}")
    return str(producer.send_message_in_transaction(msg, lambda *_: None).msg_id)


def test_discarded_transactions_show_what_became_of_them_once_resumed(
    system_topics: str,
    start_coordinator: Callable[..., Any],
    make_transaction_producer: Callable[..., Any],
    new_topic: Callable[..., str],
    new_group: Callable[..., str],
) -> None:
    first = start_coordinator(**FAST)
    checker = Checker()
    group, topic = new_group("PG"), new_topic(partitions=1)
    producer = make_transaction_producer(group, checker)
    sent = {key: send(producer, topic, key) for key in ("paid", "declined", "unsure")}
    wait_until(
        lambda: set(sent.values()) <= set(listed(system_topics, "--discarded", "--group", group)),
        timeout=60,
        what="three discards",
    )
    # Resumed messages are checked once at 1.5 s, then not for a minute: "unsure" stays pending.
    first.stop(30)
    start_coordinator(**{**FAST, "check_interval_ms": 60_000})
    checker.answers = {"paid": TransactionStatus.COMMIT, "declined": TransactionStatus.ROLLBACK}
    for tid in sent.values():
        resumed = CliRunner().invoke(
            cli, ["transactions", "resume", "--bootstrap", system_topics, tid]
        )
        assert resumed.exit_code == 0, resumed.output

    def outcomes() -> dict[str, str | None]:
        rows = listed(system_topics, "--discarded", "--group", group, "--topic", topic)
        return {key: rows[tid]["outcome"] for key, tid in sent.items()}

    wait_until(
        lambda: (
            outcomes()
            == {
                "paid": "committed",
                "declined": "rolled back",
                "unsure": "pending again",
            }
        ),
        timeout=30,
        what="the outcomes",
    )
    table = CliRunner().invoke(
        cli, ["transactions", "list", "--discarded", "--bootstrap", system_topics]
    )
    [line] = [line for line in table.stdout.splitlines() if sent["paid"] in line]
    assert " ago " in line, line
    assert " committed " in line, line


def test_pending_transactions_are_filtered_by_group_and_topic(
    system_topics: str,
    make_transaction_producer: Callable[..., Any],
    new_topic: Callable[..., str],
    new_group: Callable[..., str],
) -> None:
    # No coordinator runs: the half messages stay pending.
    groups, topics = [new_group("PG"), new_group("PG")], [new_topic(), new_topic()]
    sent = {}
    for group in groups:
        producer = make_transaction_producer(group, lambda _msg: TransactionStatus.UNKNOWN)
        for topic in topics:
            sent[(group, topic)] = send(producer, topic, "k")
    only = listed(system_topics, "--group", groups[0], "--topic", topics[1])
    assert set(only) == {sent[(groups[0], topics[1])]}
    [row] = only.values()
    assert (row["producer_group"], row["topic"]) == (groups[0], topics[1])
    assert row["age_ms"] >= 0
    assert set(listed(system_topics, "--group", groups[1])) == {
        sent[(groups[1], topics[0])],
        sent[(groups[1], topics[1])],
    }
