"""``rmq-adapter groups`` and the lag exporter on a real broker, with the 5.x ``SimpleConsumer``'s
group (a Kafka share group) as the group: listed, its lag as Kafka counts it, and a reset that
waits for the group to be empty."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from click.testing import CliRunner, Result

from adapter.ops.cli import main as cli
from adapter.ops.exporter import read_snapshot
from adapter.ops.groups import Groups
from adapter.ops.share_groups import ShareGroups
from adapter.v5 import FilterExpression, Message, SimpleConsumer
from adapter.v5.exception import BadRequestException
from tests.integration.v5.conftest import MakeSimpleConsumer, MakeV5Producer
from tests.integration.v5.conftest import make_simple_consumer as make_simple_consumer
from tests.support import unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(90)]

SENT = 6
HOLD_S = 25
"""Held messages stay invisible past the test (a lock of 30 s allows up to 27 s)."""


def groups(bootstrap: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["groups", *args, "--bootstrap", bootstrap])


def rows_of(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()]


def total_lag(bootstrap: str, group: str) -> int | None:
    shown = groups(bootstrap, "lag", group)
    assert shown.exit_code == 0, shown.output
    totals = [row for row in rows_of(shown.output) if row[:2] == ["total", "lag"]]
    return int(totals[0][2].replace(",", "")) if totals else None


@dataclass
class HalfAcked:
    topic: str
    group: str
    consumer: SimpleConsumer
    acked: int
    held: list[Message]

    @property
    def lag(self) -> int:
        return SENT - self.acked


@pytest.fixture
def half_acked(
    make_v5_producer: MakeV5Producer, make_simple_consumer: MakeSimpleConsumer, new_topic
) -> Iterator[HalfAcked]:
    """A running SimpleConsumer's group that was sent six messages on a two-queue topic,
    received some, acked all of those but one and holds that one. (The pool's share
    consumers may hold more, fetched and not handed out: Kafka counts them in the lag too.)"""
    topic, group = new_topic(2, "Shared"), unique("GID_simple")
    producer = make_v5_producer()
    for n in range(SENT):
        message = Message()
        message.topic, message.body = topic, f"m{n}".encode()
        producer.send(message)
    consumer = make_simple_consumer(
        group, {topic: FilterExpression()}, await_duration=0.5, lock_duration=30
    )
    case = HalfAcked(topic, group, consumer, 0, [])

    def ack_the_first_and_hold_the_next() -> bool:
        # The first is acked at once: a share consumer holding an unacked record fetches no
        # more, and what it fetched ahead stays locked to it (30 s), so holding the first
        # while waiting for a second could wait out the lock (seen in CI).
        for message in consumer.receive(SENT, HOLD_S):
            if case.acked == 0:
                consumer.ack(message)
                case.acked += 1
                continue
            for earlier in case.held:  # acked as soon as a later one comes, never late
                consumer.ack(earlier)
                case.acked += 1
            case.held = [message]
        return case.acked >= 1 and bool(case.held)

    wait_until(ack_the_first_and_hold_the_next, timeout=20, what="two messages or more")
    yield case
    if consumer.is_running:
        release(case)


def release(case: HalfAcked) -> None:
    """Back to the group at once: a shutdown waits for the messages its consumer holds."""
    for message in case.held:
        with contextlib.suppress(BadRequestException):  # its invisible duration ended: back
            case.consumer.change_invisible_duration(message, 0)


def test_a_simple_consumer_s_group_is_listed_and_lags_by_what_it_has_not_acked(
    kafka_bootstrap: str, half_acked: HalfAcked
) -> None:
    topic, group = half_acked.topic, half_acked.group
    wait_until(
        lambda: total_lag(kafka_bootstrap, group) == half_acked.lag,
        timeout=20,
        what=f"a lag of the {half_acked.lag} messages not acked",
    )
    shown = groups(kafka_bootstrap, "lag", group)
    assert shown.output.startswith(f"group {group}: stable, ")
    assert "simple (share group)" in shown.output.splitlines()[0]
    assert ["queue", "end", "offset", "start", "offset", "lag"] in rows_of(shown.output)
    queues = [row for row in rows_of(shown.output) if row[0].startswith(f"{topic}[")]
    assert len(queues) == 2
    assert sum(int(row[1]) for row in queues) == SENT, "the end offsets"
    listed = groups(kafka_bootstrap, "list")
    assert listed.exit_code == 0, listed.output
    row = next(row for row in rows_of(listed.output) if row[0] == group)
    assert row[:6] == [group, "-", "simple", "(share", "group)", "stable"]
    assert int(row[6]) >= 1, "the SimpleConsumer's share consumers, each a member"
    conf = {"bootstrap.servers": kafka_bootstrap}
    kafka = Groups(conf, 10)
    exported = read_snapshot(kafka, system_groups=False, share=ShareGroups(kafka, conf, 10))
    assert exported.accumulation[(group, topic)] == half_acked.lag
    assert exported.consumer_offset[(group, topic)] == half_acked.acked, "the end less the lag"
    assert exported.producer_offset[topic] == SENT


def test_a_share_group_is_reset_only_once_empty_and_then_as_planned(
    kafka_bootstrap: str, half_acked: HalfAcked
) -> None:
    topic, group = half_acked.topic, half_acked.group
    refused = groups(kafka_bootstrap, "reset", group, "--to-earliest")
    assert refused.exit_code == 1
    assert "live member(s)" in refused.output
    assert "only while it is empty" in refused.output
    wait_until(
        lambda: total_lag(kafka_bootstrap, group) == half_acked.lag, timeout=20, what="the acks"
    )
    release(half_acked)
    half_acked.consumer.shutdown()
    wait_until(
        lambda: "empty, 0 members" in groups(kafka_bootstrap, "lag", group).output,
        timeout=30,
        what="the group empty",
    )
    planned = groups(kafka_bootstrap, "reset", group, "--topic", topic, "--to-earliest")
    assert planned.exit_code == 0, planned.output
    assert f"0 messages skipped, {half_acked.acked} replayed" in planned.output
    assert total_lag(kafka_bootstrap, group) == half_acked.lag, "a plan changes nothing"
    done = groups(kafka_bootstrap, "reset", group, "--topic", topic, "--to-earliest", "--execute")
    assert done.exit_code == 0, done.output
    assert "the group's offsets are reset" in done.output
    assert total_lag(kafka_bootstrap, group) == SENT


def test_a_name_that_is_no_group_of_either_kind_is_one_clear_line(kafka_bootstrap: str) -> None:
    unknown = groups(kafka_bootstrap, "lag", unique("GID_none"))
    assert unknown.exit_code == 1
    assert "no consumer group or share group" in unknown.output
    reset = groups(kafka_bootstrap, "reset", unique("GID_none"), "--to-latest")
    assert reset.exit_code == 1
    assert "no consumer group or share group" in reset.output
