"""Delayed messages: the producer parks them on SCHEDULE_TOPIC_XXXX, the forwarder delivers them."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from adapter import naming
from adapter import properties as prop
from adapter.client import Message
from adapter.clock import ManualClock
from adapter.config import KafkaSettings
from adapter.delay import DelayLevels
from adapter.hops import HopTable
from adapter.kafka import clients
from adapter.kafka.worker import CONSUMER_RESET_S
from adapter.schedule.config import ForwarderConfig
from adapter.schedule.envelope import scheduled
from adapter.schedule.forwarder import ScheduleForwarder
from adapter.schedule.plan import hop_headers
from adapter.wire import codec
from tests.support import (
    Recorder,
    create_topic,
    metric,
    parked_from,
    read_committed,
    unique,
    wait_until,
)
from tests.workers import start_schedule_forwarder, start_worker

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(240)]

LEVELS = DelayLevels.parse()
SCHEDULE = naming.kafka_topic(naming.SCHEDULE_TOPIC)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def delayed(topic: str, body: str, level: int, **props: str) -> Message:
    message = Message(topic)
    message.set_body(body)
    message.set_delay_time_level(level)
    for key, value in props.items():
        message.set_property(key, value)
    return message


def test_each_of_the_first_levels_delivers_never_before_its_delay(
    start_forwarder, make_producer, make_consumer, new_topic, new_group
) -> None:
    topic = new_topic(partitions=2)
    start_forwarder()
    recorder = Recorder()
    make_consumer(new_group(), topic, recorder)
    producer = make_producer()

    sent = {}
    for level in (1, 2, 3):
        message = delayed(topic, f"level-{level}", level, order="42")
        message.set_tags("TagA")
        message.set_keys("key-1")
        before = now_ms()
        result = producer.send_sync(message)
        sent[f"level-{level}"] = (level, before, result.msg_id)

    wait_until(lambda: len(recorder) >= 3, timeout=60, what="three delayed messages")
    assert len(recorder) == 3
    for received in recorder.messages:
        level, sent_at, msg_id = sent[received.body.decode()]
        assert received.store_timestamp - sent_at >= LEVELS.delay_ms(level), "not before due"
        assert received.id == msg_id, "UNIQ_KEY is kept"
        assert received.topic == topic
        assert received.tags == b"TagA"
        assert received.keys == b"key-1"
        assert received.get_property("order") == b"42"
        assert received.get_property(prop.DELAY) == b"", "DELAY is dropped on delivery"
        assert received.get_property(prop.REAL_TOPIC) == topic.encode()
        assert received.born_timestamp <= received.store_timestamp


def test_messages_of_one_level_arrive_in_the_order_they_were_sent(
    system_topics: str, start_forwarder, make_producer, new_topic
) -> None:
    topic = new_topic(partitions=1)
    start_forwarder()
    producer = make_producer()
    bodies = [f"m{i:03d}" for i in range(200)]
    for body in bodies:
        producer.send_oneway(delayed(topic, body, 1))
    assert producer.flush() == 0

    records = read_committed(system_topics, topic, len(bodies))
    assert [r.value().decode() for r in records] == bodies


def test_many_messages_across_levels_all_arrive_exactly_once(
    system_topics: str, start_forwarder, make_producer, new_topic
) -> None:
    topic = new_topic(partitions=4)
    forwarder = start_forwarder()
    producer = make_producer()
    bodies = [f"m{i}" for i in range(600)]
    for i, body in enumerate(bodies):
        producer.send_oneway(delayed(topic, body, 1 + i % 2))
    assert producer.flush() == 0

    records = read_committed(system_topics, topic, len(bodies))
    assert Counter(r.value().decode() for r in records) == Counter(bodies)
    forwarded = {
        level: forwarder.registry.get_sample_value("rmq_schedule_forwarded_total", {"level": level})
        for level in ("1", "2")
    }
    assert all(count is not None and count >= 300 for count in forwarded.values()), forwarded
    lateness = forwarder.registry.get_sample_value("rmq_schedule_lateness_seconds_count")
    assert lateness is not None
    assert lateness >= 600


def test_a_level_above_the_highest_is_clamped_to_it(
    system_topics: str, make_producer, new_topic
) -> None:
    topic = new_topic(partitions=1)
    producer = make_producer()
    result = producer.send_sync(delayed(topic, "far future", 99))
    schedule = naming.kafka_topic(naming.SCHEDULE_TOPIC)
    consumer = clients.consumer({"bootstrap.servers": system_topics, "group.id": unique("peek")})
    try:
        consumer.assign([TopicPartition(schedule, LEVELS.max_level - 1, result.offset)])
        record = wait_until(lambda: consumer.poll(0.5), timeout=30, what="the parked record")
    finally:
        consumer.close()
    assert dict(record.headers())[prop.DELAY] == str(LEVELS.max_level).encode()
    assert dict(record.headers())[prop.UNIQ_KEY] == result.msg_id.encode()


def test_a_corrupt_record_in_schedule_is_parked_and_the_forwarder_keeps_going(
    system_topics: str, start_forwarder, make_producer, new_topic
) -> None:
    topic = new_topic(partitions=1)
    raw = clients.producer({"bootstrap.servers": system_topics})
    schedule = naming.kafka_topic(naming.SCHEDULE_TOPIC)
    corrupt: list = []
    raw.produce(
        schedule, b"\xc3\x01 not avro", partition=0, on_delivery=lambda e, m: corrupt.append(m)
    )
    assert raw.flush(10) == 0
    producer = make_producer()
    producer.send_sync(delayed(topic, "after the corrupt one", 1))

    start_forwarder()
    records = read_committed(system_topics, topic, 1)
    assert [r.value() for r in records] == [b"after the corrupt one"]

    parked = parked_from(system_topics, 0, corrupt[0].offset())
    assert len(parked) == 1
    assert parked[0].value() == b"\xc3\x01 not avro", "the record is kept as it was"
    assert dict(parked[0].headers())["reason"].startswith(b"corrupt")


def test_two_forwarders_share_the_levels_and_one_takes_over_when_the_other_leaves(
    system_topics: str, start_forwarder, make_producer, new_topic
) -> None:
    first, second = start_forwarder(), start_forwarder()
    wait_until(
        lambda: (
            first._assigned
            and second._assigned
            and len(first._assigned | second._assigned) == HopTable.of(LEVELS).partitions
        ),
        timeout=60,
        what="both forwarders to own some levels",
    )
    assert not first._assigned & second._assigned, "a level has one owner"

    first.stop()
    wait_until(
        lambda: len(second._assigned) == HopTable.of(LEVELS).partitions,
        timeout=60,
        what="the takeover",
    )
    topic = new_topic(partitions=2)
    producer = make_producer()
    bodies = [f"m{i}" for i in range(100)]
    for i, body in enumerate(bodies):
        producer.send_oneway(delayed(topic, body, 1 + i % 2))
    assert producer.flush() == 0
    records = read_committed(system_topics, topic, len(bodies))
    assert Counter(r.value().decode() for r in records) == Counter(bodies)


def test_a_forwarder_killed_mid_burst_delivers_every_message_exactly_once(
    system_topics: str, make_producer, new_topic
) -> None:
    topic = new_topic(partitions=2)
    producer = make_producer()
    bodies = [f"m{i}" for i in range(3000)]

    def send_for_three_seconds() -> None:
        for i, body in enumerate(bodies):
            producer.send_oneway(delayed(topic, body, 1))
            if i % 10 == 9:
                time.sleep(0.01)
        producer.flush()

    kafka_topic = naming.kafka_topic(topic)
    watcher = clients.consumer({"bootstrap.servers": system_topics, "group.id": unique("w")})

    def forwarded_so_far() -> int:
        return sum(
            watcher.get_watermark_offsets(TopicPartition(kafka_topic, p), timeout=5)[1]
            for p in (0, 1)
        )

    first = start_schedule_forwarder(system_topics, unique("killed"))
    sender = threading.Thread(target=send_for_three_seconds)
    sender.start()
    try:
        wait_until(lambda: forwarded_so_far() >= 300, timeout=60, what="forwarding under way")
        assert sender.is_alive(), "the kill comes mid-burst"
    finally:
        first.kill()
        sender.join(60)

    # The successor has another id: the victim's open transaction ends by its timeout
    # (10 s), and whatever the victim had not committed is forwarded again, once.
    second = start_schedule_forwarder(system_topics, unique("successor"))
    try:
        records = read_committed(system_topics, topic, len(bodies), timeout=120)
    finally:
        assert second.terminate() == 0, "the forwarder stops cleanly on SIGTERM"
        watcher.close()
    counts = Counter(r.value().decode() for r in records)
    assert set(counts) == set(bodies), "no message lost"
    assert [b for b, c in counts.items() if c > 1] == [], "no message twice"


def end_offset(bootstrap: str, topic: str) -> int:
    """How many records the topic's partitions hold (committed or not)."""
    kafka_topic = naming.kafka_topic(topic)
    reader = clients.consumer({"bootstrap.servers": bootstrap, "group.id": unique("end")})
    try:
        partitions = reader.list_topics(kafka_topic, timeout=10).topics[kafka_topic].partitions
        return sum(
            reader.get_watermark_offsets(TopicPartition(kafka_topic, p), timeout=10)[1]
            for p in partitions
        )
    finally:
        reader.close()


def on_a_manual_clock(bootstrap: str, clock: ManualClock, **config: int) -> ScheduleForwarder:
    """A forwarder driven turn by turn on ``clock``."""
    settings = ForwarderConfig(
        KafkaSettings(bootstrap), worker_id=unique("test"), max_wait_ms=100, **config
    )
    return ScheduleForwarder(settings, clock=clock)


def test_on_an_injected_clock_a_delayed_message_moves_exactly_when_its_level_is_due(
    clock_kafka: str, make_producer
) -> None:
    topic = create_topic(clock_kafka, partitions=1)
    make_producer(bootstrap=clock_kafka).send_sync(delayed(topic, "in five seconds", 2))
    # Started after the broker stamped the record (on a clock behind the broker's the delay
    # would count from the read: test_clock_skew).
    clock = ManualClock()
    forwarder = on_a_manual_clock(clock_kafka, clock)
    try:
        assert forwarder.drain() == 0
        clock.advance(4_000)
        assert forwarder.drain() == 0
        assert end_offset(clock_kafka, topic) == 0, "not before its level's 5 s"
        clock.advance(2_000)
        forwarder.drain()
        [record] = read_committed(clock_kafka, topic, 1)
        assert record.value() == b"in five seconds"
    finally:
        forwarder.close()


def test_a_batch_prepared_ahead_of_its_due_time_writes_nothing_until_the_clock_gets_there(
    clock_kafka: str, make_producer
) -> None:
    topic = create_topic(clock_kafka, partitions=1)
    make_producer(bootstrap=clock_kafka).send_sync(delayed(topic, "in one second", 1))
    clock = ManualClock()
    forwarder = on_a_manual_clock(clock_kafka, clock, prepare_ahead_ms=20)
    try:
        assert forwarder.drain() == 0
        due = forwarder.heads.next_wakeup_ms()
        assert due is not None
        clock.advance(due - 10 - clock.now_ms())
        assert forwarder.run_once() == 0, "prepared 10 ms ahead, then the clock did not move"
        assert end_offset(clock_kafka, topic) == 0, "not a record written, not even aborted"
        clock.advance(10)
        assert forwarder.drain() == 1
        [record] = read_committed(clock_kafka, topic, 1)
        assert record.value() == b"in one second"
    finally:
        forwarder.close()


def test_records_of_a_level_the_consumer_delivers_again_are_not_forwarded_again(
    clock_kafka: str, make_producer, caplog
) -> None:
    topic = create_topic(clock_kafka, partitions=1)
    make_producer(bootstrap=clock_kafka).send_sync(delayed(topic, "once", 1))
    clock = ManualClock()
    forwarder = on_a_manual_clock(clock_kafka, clock)
    try:
        forwarder.drain()
        clock.advance(2_000)
        assert forwarder.drain() == 1
        # A consumer whose position goes back (as after a leader change) delivers the level
        # again; its records are due, and would be forwarded a second time.
        forwarder.consumer().seek(TopicPartition(SCHEDULE, 0, 0))
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            forwarder.run_once()
    finally:
        forwarder.close()
    [record] = read_committed(clock_kafka, topic, 1)
    assert record.value() == b"once"
    assert "again, from offset 0" in caplog.text, "the records read again were noticed"


def test_a_commit_that_times_out_after_reaching_kafka_forwards_nothing_twice(
    clock_kafka: str, make_producer
) -> None:
    topic = create_topic(clock_kafka, partitions=1)
    producer = make_producer(bootstrap=clock_kafka)
    producer.send_sync(delayed(topic, "first", 1))
    clock = ManualClock()
    forwarder = on_a_manual_clock(clock_kafka, clock)
    commit = forwarder.tx.commit

    def commit_then_time_out() -> None:
        # The commit reaches the coordinator, then the client gives up waiting for the answer,
        # as when a broker dies mid-commit (seen on the cluster: delivered twice).
        forwarder.tx.commit = commit  # type: ignore[method-assign]
        commit()
        forwarder.tx.in_transaction = True
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "commit timed out", retriable=True))

    try:
        forwarder.drain()
        clock.advance(2_000)
        forwarder.tx.commit = commit_then_time_out  # type: ignore[method-assign]
        with pytest.raises(KafkaException, match="commit timed out"):
            forwarder.drain()
        producer.send_sync(delayed(topic, "second", 1))
        clock.advance(2_000)
        forwarder.drain()
        clock.advance(2_000)
        forwarder.drain()
    finally:
        forwarder.close()
    bodies = [r.value() for r in read_committed(clock_kafka, topic, 2)]
    assert bodies == [b"first", b"second"], "each once, in order"


def test_records_taken_for_a_batch_are_forwarded_after_a_failed_metadata_lookup(
    clock_kafka: str, make_producer
) -> None:
    topic = create_topic(clock_kafka, partitions=1)
    producer = make_producer(bootstrap=clock_kafka)
    producer.send_sync(delayed(topic, "first", 1))
    producer.send_sync(delayed(topic, "second", 1))
    clock = ManualClock()
    forwarder = on_a_manual_clock(clock_kafka, clock)
    count = forwarder.topics.count

    def times_out_once(topic: str, *, create: bool = False) -> int:
        # The batch's records are taken from memory, then the real topic's partition count
        # cannot be read (a metadata request that timed out).
        forwarder.topics.count = count  # type: ignore[method-assign]
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "metadata timed out"))

    try:
        forwarder.drain()
        clock.advance(2_000)
        forwarder.topics.count = times_out_once  # type: ignore[method-assign]
        with pytest.raises(KafkaException, match="metadata timed out"):
            forwarder.drain()
        forwarder.drain()
    finally:
        forwarder.close()
    bodies = [r.value() for r in read_committed(clock_kafka, topic, 2)]
    assert bodies == [b"first", b"second"], "each once, in order"


def test_a_verdict_to_park_a_record_does_not_outlive_its_level_leaving_the_forwarder(
    clock_kafka: str, make_producer
) -> None:
    topic = create_topic(clock_kafka, partitions=1)
    make_producer(bootstrap=clock_kafka).send_sync(delayed(topic, "deliverable now", 1))
    clock = ManualClock()
    forwarder = on_a_manual_clock(clock_kafka, clock)
    try:
        forwarder.drain()
        head = forwarder.heads.head(0)
        assert head is not None
        # A refusal no retry cures (the topic's size limit, since raised by an operator) ...
        forwarder.refusals.doom(0, head.offset, "refused: Broker: Message size too large")
        # ... then the level leaves this worker: its consumer is replaced after 30 s of failed
        # turns, and the level is read again from its committed position.
        forwarder.failures.failed("a turn", KafkaException(KafkaError(KafkaError._TRANSPORT)))
        clock.advance(int(CONSUMER_RESET_S * 1000) + 1_000)
        forwarder._distrust_a_failing_consumer()
        forwarder.failures.succeeded("a turn")
        forwarder.drain()
    finally:
        forwarder.close()
    [record] = read_committed(clock_kafka, topic, 1)
    assert record.value() == b"deliverable now", "judged again, not parked by a stale verdict"


def test_a_timer_dated_absurdly_far_ahead_is_parked_instead_of_hopping_every_two_hours(
    clock_kafka: str,
) -> None:
    topic = create_topic(clock_kafka, partitions=1)
    clock = ManualClock()
    message = Message(topic)
    message.set_body("in a thousand days")
    value = codec.encode(scheduled(message, level=1, unique_key=unique("T"), born_ms=0))
    far = clock.now_ms() + 1_000 * 86_400_000  # producers allow 40 days; anyone can write this
    headers = hop_headers(unique("T"), far, clock.now_ms())
    raw = clients.producer({"bootstrap.servers": clock_kafka})
    written: list = []
    raw.produce(
        SCHEDULE, value, partition=17, headers=headers, on_delivery=lambda e, m: written.append(m)
    )
    assert raw.flush(10) == 0
    forwarder = on_a_manual_clock(clock_kafka, clock)
    try:
        forwarder.drain()
    finally:
        forwarder.close()
    assert metric(forwarder, "rmq_schedule_timer_hops_total") == 0, "it did not hop on"
    [parked] = parked_from(clock_kafka, 17, written[0].offset())
    assert "1000 days ahead" in dict(parked.headers())["reason"].decode()


@pytest.mark.long  # half a minute: a grace waited out
def test_records_whose_topic_is_missing_do_not_hold_their_level_and_are_parked_after_a_grace(
    clock_kafka: str, make_producer
) -> None:
    gone, topic = unique("NeverCreated"), create_topic(clock_kafka, partitions=1)
    producer = make_producer(bootstrap=clock_kafka)
    for i in range(3):  # each record of a missing topic held its level for the whole grace
        producer.send_sync(delayed(gone, f"to nowhere {i}", 1))
    producer.send_sync(delayed(topic, "behind them", 1))
    clock = ManualClock()
    forwarder = on_a_manual_clock(clock_kafka, clock, missing_topic_grace_ms=30_000)
    try:
        forwarder.drain()
        clock.advance(2_000)
        forwarder.drain()
        assert len(read_committed(clock_kafka, topic, 1, timeout=10)) == 1, "the level went on"
        for _ in range(7):  # 35 s of the forwarder's clock: waits of 0.1, 5, 10 and 10 s
            clock.advance(5_000)
            forwarder.drain()
    finally:
        forwarder.close()
    [record] = read_committed(clock_kafka, topic, 1)
    assert record.value() == b"behind them"
    parked = [
        r
        for r in read_committed(clock_kafka, naming.POISON_TOPIC, 3, timeout=30)
        if gone.encode() in dict(r.headers()).get("reason", b"")
    ]
    assert sorted(r.value() is not None for r in parked) == [True] * 3, "each parked once"
    for why in [dict(r.headers())["reason"].decode() for r in parked]:
        assert why.startswith(f"missing topic: {gone!r} did not exist for 3"), why
    assert metric(forwarder, "rmq_schedule_parked_total", reason="missing topic") == 3


def test_a_forwarder_in_burst_mode_delivers_what_is_due_and_exits_zero(
    system_topics, make_producer, new_topic
) -> None:
    topic = new_topic(partitions=1)
    producer = make_producer()
    for i in range(20):
        producer.send_sync(delayed(topic, f"m{i}", 1))
    time.sleep(1.0)  # level 1: due one second after the broker stored them
    worker = start_worker(
        "process",
        *("adapter", "worker", "schedule", "--bootstrap", system_topics, "--burst"),
    )
    assert worker.wait(timeout=90) == 0
    assert sorted(r.value() for r in read_committed(system_topics, topic, 20)) == sorted(
        f"m{i}".encode() for i in range(20)
    )
