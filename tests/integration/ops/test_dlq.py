"""``rmq-adapter dlq list|show|resend|export`` on a real broker, with the 2.0 consumer's dead
letters: each resent message is consumed once by its group, whether the resend is repeated or
SIGKILLed half-way and run again."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections import Counter

import pytest
from click.testing import CliRunner, Result

from adapter import naming
from adapter.client import ConsumeStatus, Message
from adapter.ops.cli import main as cli
from tests.support import read_committed_all_there, unique, wait_until
from tests.workers import start_worker

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(150)]


def dlq(bootstrap: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["dlq", *args, "--bootstrap", bootstrap])


class FailingFirst:
    """Fails every delivery while ``failing`` is set, then consumes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.failing = True
        self.consumed: Counter[str] = Counter()

    def __call__(self, message) -> ConsumeStatus:  # type: ignore[no-untyped-def]
        with self.lock:
            if self.failing:
                return ConsumeStatus.RECONSUME_LATER
            self.consumed[message.body.decode()] += 1
        return ConsumeStatus.CONSUME_SUCCESS


@pytest.fixture
def dead_lettered(kafka_bootstrap, new_topic, make_producer, make_consumer):
    """Four messages of a group that failed each once with no retries: all in its DLQ. The
    group's consumer runs on, now consuming; their ids by body."""
    topic, group = new_topic(1, "Failing"), unique("GID_dlq")
    callback = FailingFirst()
    make_consumer(group, topic, callback, max_reconsume_times=0)
    producer = make_producer()
    ids: dict[str, str] = {}
    for n in range(4):
        message = Message(topic)
        message.set_body(f"order-{n}")
        message.set_property("binary-ish", "kept")
        ids[f"order-{n}"] = producer.send_sync(message).msg_id
    wait_until(
        lambda: read_committed_all_there(kafka_bootstrap, naming.dlq_topic(group), 4),
        timeout=60,
        what="four dead letters",
    )
    with callback.lock:
        callback.failing = False
    return group, callback, ids


def consumed_once_each(callback: FailingFirst, bodies: list[str]) -> None:
    wait_until(
        lambda: sum(callback.consumed.values()) >= len(bodies), timeout=60, what="the resent"
    )
    time.sleep(1.5)  # a second delivery of any of them would arrive in this time
    assert callback.consumed == Counter({body: 1 for body in bodies})


def test_list_show_and_export_tell_each_dead_letter_s_id_topic_and_reason(
    kafka_bootstrap: str, dead_lettered, tmp_path
) -> None:
    group, _, ids = dead_lettered
    listed = dlq(kafka_bootstrap, "list", group)
    assert listed.exit_code == 0, listed.output
    assert "4 dead letters" in listed.output
    assert all(msg_id in listed.output for msg_id in ids.values())
    assert "failed 1 deliveries" in listed.output
    shown = dlq(kafka_bootstrap, "show", group, ids["order-2"])
    assert shown.exit_code == 0, shown.output
    assert "body        order-2" in shown.output
    assert "binary-ish = kept" in shown.output
    out = tmp_path / "dlq.jsonl"
    exported = dlq(kafka_bootstrap, "export", group, "--output", str(out))
    assert exported.exit_code == 0, exported.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(base64.b64decode(line["body_base64"]).decode() for line in lines) == sorted(ids)
    assert {line["msg_id"] for line in lines} == set(ids.values())


def test_a_resend_repeated_delivers_each_message_to_its_group_once(
    kafka_bootstrap: str, dead_lettered
) -> None:
    group, callback, ids = dead_lettered
    first = dlq(kafka_bootstrap, "resend", group, "--msg-id", ids["order-1"])
    assert first.exit_code == 0, first.output
    assert "1 message resent to %RETRY%" in first.output
    again = dlq(kafka_bootstrap, "resend", group, "--msg-id", ids["order-1"])
    assert again.exit_code == 0, again.output
    assert "resent before" in again.output
    assert "0 messages resent" in again.output
    everything = dlq(kafka_bootstrap, "resend", group, "--begin", "0")
    assert everything.exit_code == 0, everything.output
    assert "3 messages resent" in everything.output
    assert "1 resent before" in everything.output
    consumed_once_each(callback, sorted(ids))


def test_a_resend_killed_half_way_and_run_again_delivers_each_message_once(
    kafka_bootstrap: str, dead_lettered
) -> None:
    group, callback, ids = dead_lettered
    args = ("adapter", "dlq", "resend", group, "--bootstrap", kafka_bootstrap, "--begin", "0")
    slow = start_worker("process", *args, "--rate", "0.5")
    slow.wait_for_output("resent ", timeout=60)
    slow.kill()  # SIGKILL, within a transaction or between two
    again = start_worker("process", *args)
    assert again.wait(60) == 0, "".join(again.lines)
    output = "".join(again.lines)
    assert "resent before" in output
    consumed_once_each(callback, sorted(ids))


def test_unknown_groups_and_ids_and_a_resend_without_a_choice_are_clear_errors(
    kafka_bootstrap: str, dead_lettered
) -> None:
    group, _, _ = dead_lettered
    none = dlq(kafka_bootstrap, "list", unique("GID_none"))
    assert none.exit_code == 1
    assert "has no dead letters" in none.output
    missing = dlq(kafka_bootstrap, "show", group, "no-such-id")
    assert missing.exit_code == 1
    assert "no dead letter with id no-such-id" in missing.output
    unchosen = dlq(kafka_bootstrap, "resend", group)
    assert unchosen.exit_code == 2
    assert "--msg-id" in unchosen.output
