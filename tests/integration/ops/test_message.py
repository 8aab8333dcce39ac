"""``rmq-adapter message show|query`` on a real broker: a message's whole life from the records it
left, for each kind of message, and a topic's messages by key and tag."""

from __future__ import annotations

import threading

import pytest
from click.testing import CliRunner, Result

from adapter.client import ConsumeStatus, Message, TransactionStatus
from adapter.ops.cli import main as cli
from tests.support import read_committed, unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(150)]

FAST = {"transaction_timeout_ms": 1500, "check_interval_ms": 1000, "check_max": 3}


def message(bootstrap: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["message", *args, "--bootstrap", bootstrap])


def new_message(topic: str, body: str, keys: str = "order-1", tags: str = "paid") -> Message:
    msg = Message(topic)
    msg.set_body(body)
    msg.set_keys(keys)
    msg.set_tags(tags)
    return msg


def shown_once(bootstrap: str, msg_id: str, text: str, timeout: float) -> str:
    """``message show``'s output once it contains ``text``."""

    def show() -> str | None:
        output = message(bootstrap, "show", msg_id).output
        return output if text in output else None

    return wait_until(show, timeout=timeout, what=f"{text!r} in the life of {msg_id}")


def lines_with(output: str, text: str) -> list[str]:
    return [line for line in output.splitlines() if text in line]


def test_a_transaction_committed_by_its_check_back_shows_half_checks_decision_and_delivery(
    system_topics, start_coordinator, make_transaction_producer, new_topic, make_consumer
) -> None:
    start_coordinator(**FAST)
    topic, group = new_topic(1, "Paid"), unique("GID_show")
    checks = threading.Event()

    def checker(_message):  # type: ignore[no-untyped-def]
        checks.set()
        return TransactionStatus.COMMIT

    producer = make_transaction_producer(unique("PG"), checker)
    sent = producer.send_message_in_transaction(
        new_message(topic, "num8"), lambda *_: TransactionStatus.UNKNOWN
    )
    read_committed(system_topics, topic, 1)
    consumed = threading.Event()
    make_consumer(group, topic, lambda _m: consumed.set() or ConsumeStatus.CONSUME_SUCCESS)
    assert consumed.wait(60)

    def shown() -> Result | None:
        found = message(system_topics, "show", sent.msg_id)
        return found if f"group {group}: consumed" in found.output else None

    output = wait_until(shown, timeout=60, what="the group's commit in the life").output
    steps = [line.split("  ", 2)[-1] for line in output.splitlines()[1:]]
    assert any(step.startswith("born (producer group PG") for step in steps), output
    assert lines_with(output, f"half message stored for {topic}")
    assert lines_with(output, "check-back 1 asked of group PG"), "the check request"
    assert lines_with(output, "COMMIT by check-back 1"), "the producer's answer to the check"
    assert lines_with(output, "committed: delivered"), "the coordinator's decision"
    assert lines_with(output, f"delivered  {topic}[0]@0")
    assert "scanned" in output
    half, delivered = (output.index("half message stored"), output.index("delivered  "))
    assert half < delivered, "steps in time order"


def test_a_rolled_back_transaction_shows_no_delivery(
    system_topics, start_coordinator, make_transaction_producer, new_topic
) -> None:
    start_coordinator(**FAST)
    topic = new_topic(1, "Cancelled")
    producer = make_transaction_producer(unique("PG"), lambda _m: TransactionStatus.UNKNOWN)
    sent = producer.send_message_in_transaction(
        new_message(topic, "cancelled"), lambda *_: TransactionStatus.ROLLBACK
    )
    output = shown_once(system_topics, sent.msg_id, "rolled back", 60)
    assert lines_with(output, "ROLLBACK by the producer")
    assert not lines_with(output, "delivered  "), "a rolled-back message is never delivered"


def test_a_delayed_message_that_failed_shows_its_level_retries_and_dead_letter(
    system_topics, start_forwarder, new_topic, make_producer, make_consumer
) -> None:
    start_forwarder()  # level 1 is 1 s; the retry goes at level 3, 10 s
    topic, group = new_topic(1, "Later"), unique("GID_fail")
    producer = make_producer()
    msg = new_message(topic, "later")
    msg.set_delay_time_level(1)
    sent = producer.send_sync(msg)
    make_consumer(group, topic, lambda _m: ConsumeStatus.RECONSUME_LATER, max_reconsume_times=1)
    output = shown_once(system_topics, sent.msg_id, "dead-lettered", 90)
    assert lines_with(output, f"on SCHEDULE_TOPIC_XXXX for {topic} (level 1)")
    assert lines_with(output, f"delivered  {topic}[0]@0")
    assert lines_with(output, f"retry 1 waiting for %RETRY%{group} (level 3)")
    assert lines_with(output, f"group {group}: redelivered (reconsume times 1)")
    assert lines_with(output, f"group {group}: dead-lettered (failed 2 deliveries")


def test_query_finds_a_topic_s_messages_by_key_and_by_tag_and_counts_what_it_read(
    kafka_bootstrap: str, new_topic, make_producer
) -> None:
    topic = new_topic(2, "Queried")
    producer = make_producer()
    ids = {}
    for n, (keys, tags) in enumerate([("order-1 shop-a", "paid"), ("order-2", "paid"),
                                      ("order-3", "refund")]):  # fmt: skip
        ids[n] = producer.send_sync(new_message(topic, f"m{n}", keys, tags)).msg_id
    by_key = message(kafka_bootstrap, "query", "--topic", topic, "--key", "shop-a")
    assert by_key.exit_code == 0, by_key.output
    assert ids[0] in by_key.output
    assert ids[1] not in by_key.output
    assert "1 message found; scanned 3 records of 1 topics" in by_key.output
    by_tag = message(kafka_bootstrap, "query", "--topic", topic, "--tag", "paid")
    assert "2 messages found" in by_tag.output
    assert ids[2] not in by_tag.output
    old = message(kafka_bootstrap, "query", "--topic", topic, "--end", "2020-01-01T00:00:00Z",
                  "--begin", "2019-12-31T00:00:00Z")  # fmt: skip
    assert "0 messages found; scanned 0 records" in old.output, "outside the window: not read"


def test_unknown_ids_topics_and_windows_are_one_clear_line(kafka_bootstrap: str) -> None:
    unknown = message(kafka_bootstrap, "show", "NO-SUCH-ID")
    assert unknown.exit_code == 1
    assert "no record of message NO-SUCH-ID in the window" in unknown.output
    missing = message(kafka_bootstrap, "query", "--topic", unique("Absent"), "--tag", "x")
    assert missing.exit_code == 1
    assert "does not exist" in missing.output
    empty = message(kafka_bootstrap, "query", "--topic", "T", "--begin", "2026-01-02T00:00:00Z",
                    "--end", "2026-01-01T00:00:00Z")  # fmt: skip
    assert empty.exit_code == 1
    assert "--end must be after --begin" in empty.output
