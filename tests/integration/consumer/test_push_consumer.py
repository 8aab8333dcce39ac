"""The drop-in PushConsumer against a real broker: filtering, models, offsets, ordering."""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter

import pytest

from adapter.client import ConsumeStatus, Message, MessageModel
from tests.support import Recorder, committed_offsets, send, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]


def test_a_tag_expression_keeps_only_the_named_tags_and_commits_the_rest(
    kafka_bootstrap, make_producer, make_consumer, new_topic, new_group
) -> None:
    topic = new_topic(partitions=1)
    producer = make_producer()
    for tag in ("TagA", "TagB", "TagC", None, "TagA"):
        send(producer, topic, f"{tag}", tags=tag)
    send(producer, topic, "last", tags="TagB")
    group = new_group()
    recorder = Recorder()
    consumer = make_consumer(group, topic, recorder, "TagA || TagB")
    wait_until(lambda: b"last" in recorder.bodies, what="the last TagB message")
    assert sorted(recorder.bodies) == sorted([b"TagA", b"TagB", b"TagA", b"last"])
    wait_until(lambda: consumer.stats.filtered == 2, timeout=10, what="two filtered out")
    consumer.shutdown()
    assert committed_offsets(kafka_bootstrap, group, topic, 1) == {0: 6}


def test_a_new_group_starts_from_the_earliest_retained_message(
    make_producer, make_consumer, new_topic, new_group
) -> None:
    topic = new_topic()
    producer = make_producer()
    for i in range(10):
        send(producer, topic, f"early-{i}")
    recorder = Recorder()
    make_consumer(new_group(), topic, recorder)
    wait_until(lambda: len(recorder) == 10, what="the ten earlier messages")
    assert sorted(recorder.bodies) == sorted(f"early-{i}".encode() for i in range(10))


def test_broadcasting_consumers_each_see_every_message(
    make_producer, make_consumer, new_topic, new_group
) -> None:
    topic = new_topic(partitions=3)
    group = new_group()
    first, second = Recorder(), Recorder()
    make_consumer(group, topic, first, model=MessageModel.BROADCASTING, instance="one")
    make_consumer(group, topic, second, model=MessageModel.BROADCASTING, instance="two")
    producer = make_producer()
    expected = sorted(f"b{i}".encode() for i in range(30))
    for i in range(30):
        send(producer, topic, f"b{i}")
    wait_until(lambda: len(first) == 30 and len(second) == 30, what="30 messages each")
    assert sorted(first.bodies) == expected
    assert sorted(second.bodies) == expected


def test_clustering_consumers_split_the_queues_and_see_each_message_once(
    make_producer, make_consumer, new_topic, new_group
) -> None:
    topic = new_topic(partitions=4)
    group = new_group()
    first, second = Recorder(), Recorder()
    one = make_consumer(group, topic, first)
    two = make_consumer(group, topic, second)
    # Four queues of the topic and the one of %RETRY%<group>, which clustering consumers
    # consume too.
    wait_until(
        lambda: (
            len(one.assigned_queues()) + len(two.assigned_queues()) == 5
            and {len(one.assigned_queues()), len(two.assigned_queues())} == {2, 3}
        ),
        timeout=60,
        what="the group to split five queues three and two",
    )
    assert not set(one.assigned_queues()) & set(two.assigned_queues())
    producer = make_producer()
    # 25 messages on each queue: the sharding keys "0".."3" hash to queues 0..3, so every
    # queue, and so each consumer, has traffic (a plain send's sticky partitioner may leave
    # a queue empty).
    for i in range(100):
        message = Message(topic)
        message.set_body(f"c{i}")
        producer.send_orderly_with_sharding_key(message, str(i % 4))
    wait_until(lambda: len(first) + len(second) == 100, what="100 messages in all")
    counts = Counter(first.bodies + second.bodies)
    assert set(counts) == {f"c{i}".encode() for i in range(100)}
    assert max(counts.values()) == 1, "no message was seen twice"
    for consumer, recorder in ((one, first), (two, second)):
        mine = {q for t, q in consumer.assigned_queues() if t == topic}
        assert mine, "each consumer owns at least one queue of the topic"
        assert {m.queue_id for m in recorder.messages} == mine
        assert len(recorder) == 25 * len(mine)


def test_a_restarted_consumer_resumes_from_committed_offsets_without_loss(
    make_producer, make_consumer, new_topic, new_group
) -> None:
    topic = new_topic(partitions=2)
    group = new_group()
    producer = make_producer()
    for i in range(20):
        send(producer, topic, f"r{i}")
    before = Recorder()
    consumer = make_consumer(group, topic, before)
    wait_until(lambda: len(before) == 20, what="the first 20")
    consumer.shutdown()
    for i in range(20, 35):
        send(producer, topic, f"r{i}")
    after = Recorder()
    make_consumer(group, topic, after)
    wait_until(lambda: len(after) == 15, what="the 15 sent while it was down")
    assert sorted(after.bodies) == sorted(f"r{i}".encode() for i in range(20, 35))
    assert sorted(before.bodies + after.bodies) == sorted(f"r{i}".encode() for i in range(35))


def test_offsets_are_committed_only_over_the_finished_prefix(
    kafka_bootstrap, make_producer, make_consumer, new_topic, new_group
) -> None:
    topic = new_topic(partitions=1)
    group = new_group()
    producer = make_producer()
    for i in range(10):
        send(producer, topic, f"p{i}")
    release = threading.Event()
    finished: list[bytes] = []

    def slow_on_the_fourth(message) -> ConsumeStatus:
        if message.body == b"p3":
            release.wait(60)
        finished.append(message.body)
        return ConsumeStatus.CONSUME_SUCCESS

    make_consumer(group, topic, slow_on_the_fourth, threads=8)
    wait_until(lambda: len(finished) == 9, what="every message but the blocked one")
    wait_until(
        lambda: committed_offsets(kafka_bootstrap, group, topic, 1)[0] == 3,
        what="the commit to stop at the blocked message (offset 3)",
    )
    release.set()
    wait_until(
        lambda: committed_offsets(kafka_bootstrap, group, topic, 1)[0] == 10, what="commit to 10"
    )
    assert sorted(finished) == sorted(f"p{i}".encode() for i in range(10))


def test_an_orderly_consumer_processes_each_queue_in_order_even_with_many_threads(
    make_producer, make_consumer, new_topic, new_group
) -> None:
    topic = new_topic(partitions=2)
    producer = make_producer()
    for i in range(40):
        for key in ("k1", "k2", "k3"):
            message = Message(topic)
            message.set_body(f"{key}:{i}")
            producer.send_orderly_with_sharding_key(message, key)
    recorder = Recorder()
    make_consumer(new_group(), topic, recorder, orderly=True, threads=8)
    wait_until(lambda: len(recorder) == 120, what="120 orderly messages")
    per_key: dict[str, list[int]] = {}
    for body in recorder.bodies:
        key, i = body.decode().split(":")
        per_key.setdefault(key, []).append(int(i))
    assert per_key == {key: list(range(40)) for key in ("k1", "k2", "k3")}


def test_an_orderly_consumer_retries_a_failed_message_in_place_without_skipping(
    make_producer, make_consumer, new_topic, new_group
) -> None:
    topic = new_topic(partitions=1)
    producer = make_producer()
    for i in range(5):
        send(producer, topic, f"o{i}")
    seen: list[tuple[bytes, int]] = []
    failures = {b"o2": 2}

    def fails_twice_on_o2(message) -> ConsumeStatus:
        seen.append((message.body, message.reconsume_times))
        if failures.get(message.body, 0) > 0:
            failures[message.body] -= 1
            return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS

    make_consumer(new_group(), topic, fails_twice_on_o2, orderly=True)
    wait_until(lambda: len(seen) == 7, what="five messages and two retries")
    assert seen == [
        (b"o0", 0),
        (b"o1", 0),
        (b"o2", 0),
        (b"o2", 1),
        (b"o2", 2),
        (b"o3", 0),
        (b"o4", 0),
    ]


class Timeline:
    """When each consumer started and ended each message, per queue."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.runs: dict[int, list[tuple[str, bytes, float, float]]] = {}

    def callback(self, who: str, slow_s: float):  # type: ignore[no-untyped-def]
        def consume(message) -> ConsumeStatus:  # type: ignore[no-untyped-def]
            started = time.monotonic()
            if message.body.endswith(b":0"):
                time.sleep(slow_s)
            with self.lock:
                run = (who, message.body, started, time.monotonic())
                self.runs.setdefault(message.queue_id, []).append(run)
            return ConsumeStatus.CONSUME_SUCCESS

        return consume

    def bodies(self) -> set[bytes]:
        with self.lock:
            return {run[1] for runs in self.runs.values() for run in runs}


@pytest.mark.long  # twenty seconds: a rebalance waits out a slow callback
@pytest.mark.timeout(120)
def test_an_orderly_queue_moves_to_a_new_owner_only_once_the_old_owners_callback_ended(
    make_producer, make_consumer, new_topic, new_group
) -> None:
    """RocketMQ's broker-side queue lock keeps a queue with the consumer running it: a
    callback that outlasts a rebalance (20 s here; the revoke used to wait 10 s) must end
    before the new owner processes any message of its queue."""
    topic, group = new_topic(partitions=3), new_group()
    producer = make_producer()
    for i in range(4):
        for key in ("0", "1", "2"):  # Java hash codes 48, 49, 50: queues 0, 1, 2
            message = Message(topic)
            message.set_body(f"{key}:{i}")
            producer.send_orderly_with_sharding_key(message, key)
    timeline = Timeline()
    first = make_consumer(group, topic, timeline.callback("first", 20), orderly=True)
    mine = lambda consumer: [q for q in consumer.assigned_queues() if q[0] == topic]  # noqa: E731
    wait_until(lambda: len(mine(first)) == 3, timeout=30, what="the three queues")
    time.sleep(1)  # the first message of each queue is running
    second = make_consumer(group, topic, timeline.callback("second", 0), orderly=True)

    wait_until(lambda: len(timeline.bodies()) == 12, timeout=60, what="all twelve messages")

    for queue, runs in timeline.runs.items():
        runs.sort(key=lambda run: run[2])
        print(queue, [(who, body.decode(), round(s, 1), round(e, 1)) for who, body, s, e in runs])
        for before, after in itertools.pairwise(runs):
            assert after[2] >= before[3], (
                f"queue {queue}: {after[:2]} began before {before[:2]} ended"
            )
        assert [body for _who, body, _s, _e in runs] == sorted({run[1] for run in runs})
    assert mine(second), "the second consumer took a queue over"


def test_a_failed_message_comes_back_ten_seconds_later_with_a_higher_reconsume_count(
    kafka_bootstrap, start_forwarder, make_producer, make_consumer, new_topic, new_group
) -> None:
    topic = new_topic(partitions=1)
    group = new_group()
    start_forwarder()
    send(make_producer(), topic, "flaky")
    attempts: list[tuple[int, str, float]] = []

    def fails_first(message) -> ConsumeStatus | None:
        attempts.append((message.reconsume_times, message.topic, time.monotonic()))
        if len(attempts) == 1:
            raise RuntimeError("the database is down")
        return ConsumeStatus.CONSUME_SUCCESS

    make_consumer(group, topic, fails_first)
    wait_until(lambda: len(attempts) == 2, timeout=60, what="the retry")
    assert [(times, where) for times, where, _ in attempts] == [(0, topic), (1, topic)]
    assert attempts[1][2] - attempts[0][2] >= 10.0 - 0.5, "level 3 (10 s), RocketMQ's first retry"
    wait_until(
        lambda: committed_offsets(kafka_bootstrap, group, topic, 1)[0] == 1,
        what="commit after success",
    )
