"""``rmq-adapter groups list|lag|reset`` on a real broker, with the 2.0 consumer as the group.

A reset is an operator's command that gets repeated: run twice, it moves the group once, and a
consumer started after it is handed each replayed message once.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable

import pytest
from click.testing import CliRunner, Result

from adapter.client import ConsumeStatus, Message, MessageModel
from adapter.ops.cli import main as cli
from tests.support import committed_offsets, unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]


def groups(bootstrap: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["groups", *args, "--bootstrap", bootstrap])


def rows_of(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()]


class Received:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.bodies: Counter[str] = Counter()

    def __call__(self, message) -> ConsumeStatus:  # type: ignore[no-untyped-def]
        with self.lock:
            self.bodies[message.body.decode()] += 1
        return ConsumeStatus.CONSUME_SUCCESS

    def total(self) -> int:
        with self.lock:
            return sum(self.bodies.values())


def send(make_producer: Callable[..., object], topic: str, bodies: list[str]) -> None:
    producer = make_producer()
    for body in bodies:
        message = Message(topic)
        message.set_body(body)
        producer.send_sync(message)  # type: ignore[attr-defined]


@pytest.fixture
def consumed_group(kafka_bootstrap, new_topic, make_producer, make_consumer):
    """A topic of two queues whose group consumed four messages and stopped."""
    topic, group = new_topic(2, "Grouped"), unique("GID_ops")
    send(make_producer, topic, [f"m{n}" for n in range(4)])
    received = Received()
    consumer = make_consumer(group, topic, received)
    wait_until(lambda: received.total() == 4, timeout=60, what="four messages consumed")
    consumer.shutdown()
    wait_until(
        # a queue that got none of the four (the sticky partitioner) keeps no commit (-1001)
        lambda: (
            sum(max(o, 0) for o in committed_offsets(kafka_bootstrap, group, topic, 2).values())
            == 4
        ),
        timeout=30,
        what="the group's commits",
    )
    return topic, group


def test_lag_counts_what_a_stopped_group_has_not_consumed_per_queue(
    kafka_bootstrap: str, consumed_group, make_producer
) -> None:
    topic, group = consumed_group
    send(make_producer, topic, ["late-1", "late-2", "late-3"])
    shown = groups(kafka_bootstrap, "lag", group)
    assert shown.exit_code == 0, shown.output
    assert f"group {group}: empty, 0 members" in shown.output
    assert ["total", "lag", "3"] in rows_of(shown.output)
    queues = [row for row in rows_of(shown.output) if row[0].startswith(f"{topic}[")]
    assert len(queues) == 2
    assert sum(int(row[3]) for row in queues) == 3
    listed = groups(kafka_bootstrap, "list")
    assert [group, "-", "clustering", "empty", "0"] in rows_of(listed.output)


def test_a_reset_is_a_plan_until_executed_and_run_twice_replays_each_message_once(
    kafka_bootstrap: str, consumed_group, make_consumer
) -> None:
    topic, group = consumed_group
    before = committed_offsets(kafka_bootstrap, group, topic, 2)
    planned = groups(kafka_bootstrap, "reset", group, "--topic", topic, "--to-earliest")
    assert planned.exit_code == 0, planned.output
    assert "0 messages skipped, 4 replayed" in planned.output
    assert "nothing changed" in planned.output
    assert committed_offsets(kafka_bootstrap, group, topic, 2) == before
    for _ in range(2):  # an operator's command, repeated
        done = groups(
            kafka_bootstrap, "reset", group, "--topic", topic, "--to-earliest", "--execute"
        )
        assert done.exit_code == 0, done.output
        assert "the group's offsets are reset" in done.output
    assert "0 replayed, 2 queues unchanged" in done.output, "the second run moves nothing"
    assert committed_offsets(kafka_bootstrap, group, topic, 2) == {0: 0, 1: 0}
    received = Received()
    make_consumer(group, topic, received)
    wait_until(lambda: received.total() >= 4, timeout=60, what="the replayed messages")
    time.sleep(1.5)  # a second delivery of any of them would arrive in this time
    assert received.bodies == Counter({f"m{n}": 1 for n in range(4)})


def test_a_reset_to_a_time_replays_from_the_first_message_stored_after_it(
    kafka_bootstrap: str, consumed_group, make_producer
) -> None:
    topic, group = consumed_group
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    send(make_producer, topic, ["after-1", "after-2"])
    done = groups(kafka_bootstrap, "reset", group, "--topic", topic, "--to-time", str(cut))
    assert done.exit_code == 0, done.output
    assert "0 messages skipped, 0 replayed" in done.output, "the group is at the end already"
    to_end = groups(kafka_bootstrap, "reset", group, "--topic", topic, "--to-latest")
    assert "2 messages skipped" in to_end.output, "the two messages after the cut"


def test_a_reset_of_a_group_with_live_members_is_refused_and_names_them(
    kafka_bootstrap: str, new_topic, make_consumer
) -> None:
    topic, group = new_topic(1, "Live"), unique("GID_live")
    make_consumer(group, topic, Received())
    wait_until(
        lambda: "1 member" in groups(kafka_bootstrap, "lag", group).output,
        timeout=30,
        what="the consumer in the group",
    )
    refused = groups(kafka_bootstrap, "reset", group, "--to-earliest", "--execute")
    assert refused.exit_code == 1
    assert "has 1 live member(s)" in refused.output
    assert "stop its consumers first" in refused.output


def test_a_broadcasting_consumer_is_listed_with_its_instance(
    kafka_bootstrap: str, new_topic, make_producer, make_consumer
) -> None:
    topic, group = new_topic(1, "Broadcast"), unique("GID_bc")
    received = Received()
    make_consumer(group, topic, received, model=MessageModel.BROADCASTING, instance="node-a")
    send(make_producer, topic, ["hello"])
    wait_until(lambda: received.total() == 1, timeout=60, what="the message")
    wait_until(
        lambda: (
            [group, "node-a", "broadcasting"]
            in [row[:3] for row in rows_of(groups(kafka_bootstrap, "list").output)]
        ),
        timeout=30,
        what="the broadcasting instance (its offsets) in the list",
    )


def test_an_unknown_group_or_a_bad_time_is_one_clear_line(kafka_bootstrap: str) -> None:
    unknown = groups(kafka_bootstrap, "lag", unique("GID_none"))
    assert unknown.exit_code == 1
    assert "no consumer group" in unknown.output
    bad = groups(kafka_bootstrap, "reset", "G", "--to-time", "yesterday")
    assert bad.exit_code == 2
    assert "'yesterday' is not a time" in bad.output
    both = groups(kafka_bootstrap, "reset", "G", "--to-earliest", "--to-latest")
    assert both.exit_code == 2
    assert "exactly one of" in both.output
