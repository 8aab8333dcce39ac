"""Timer messages at any time (the 5.x ``delivery_timestamp``), against a real broker: never
early, on time, exactly once when the forwarder is SIGKILLed mid-burst, and recallable before
they are due, with exactly one of a recall and a racing delivery winning."""

from __future__ import annotations

import functools
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from adapter import naming
from adapter import properties as prop
from adapter.clock import ManualClock
from adapter.config import KafkaSettings
from adapter.kafka import clients
from adapter.schedule.config import ForwarderConfig
from adapter.schedule.forwarder import ScheduleForwarder
from adapter.schedule.recall import RecallHandle
from adapter.v5 import ClientConfiguration, Credentials, Message, Producer
from adapter.v5.exception import BadRequestException, IllegalArgumentException
from tests.integration.v5.conftest import MakeV5Producer
from tests.support import create_topic, metric, parked_from, read_committed, unique, wait_until
from tests.workers import start_schedule_forwarder

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(240)]

DAY_MS = 86_400_000


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def timer(topic: str, body: str, deliver_at_ms: float) -> Message:
    message = Message()
    message.topic = topic
    message.body = body.encode()
    message.delivery_timestamp = deliver_at_ms
    return message


def header(record, name: str) -> bytes | None:  # type: ignore[no-untyped-def]
    return next((v for k, v in record.headers() or () if k == name), None)


def assert_never_early(records) -> None:  # type: ignore[no-untyped-def]
    """Each delivered record was written by the forwarder at or after its deliver time."""
    for record in records:
        deliver_at = int(header(record, prop.TIMER_DELIVER_MS) or b"0")
        _, written_ms = record.timestamp()
        assert written_ms >= deliver_at, f"{record.value()!r} early by {deliver_at - written_ms}"


def test_timers_a_second_ahead_arrive_on_time_never_early_with_their_deliver_time(
    make_v5_producer: MakeV5Producer, system_topics: str, start_forwarder, new_topic
) -> None:
    topic = new_topic(partitions=2)
    producer = make_v5_producer()
    start_forwarder()
    deliver_at = {f"t{i}": now_ms() + 1000 + 37 * i for i in range(20)}
    receipts = [producer.send(timer(topic, body, at)) for body, at in deliver_at.items()]
    assert all(r.recall_handle for r in receipts), "every timer can be recalled"

    records = read_committed(system_topics, topic, 20, timeout=60)

    assert_never_early(records)
    assert {r.value().decode(): int(header(r, prop.TIMER_DELIVER_MS)) for r in records} == (
        deliver_at
    )
    lateness = sorted(r.timestamp()[1] - int(header(r, prop.TIMER_DELIVER_MS)) for r in records)
    print(f"lateness ms: p50 {lateness[10]}, max {lateness[-1]}")


def test_a_timer_given_as_float_seconds_or_milliseconds_is_delivered_at_its_time(
    make_v5_producer: MakeV5Producer, system_topics: str, start_forwarder, new_topic
) -> None:
    topic = new_topic(partitions=1)
    producer = make_v5_producer()
    start_forwarder()
    in_seconds = timer(topic, "float seconds", time.time() + 1.5)
    in_ms = timer(topic, "float ms", time.time() * 1000 + 1500)
    receipts = [producer.send(in_seconds), producer.send(in_ms)]

    records = read_committed(system_topics, topic, 2, timeout=30)

    assert sorted(r.value() for r in records) == [b"float ms", b"float seconds"]
    assert_never_early(records)
    for receipt in receipts:  # a handle that works: the recall is refused for being late
        with pytest.raises(BadRequestException, match="delivered already"):
            producer.recall_message(topic, str(receipt.recall_handle))


@pytest.mark.long
def test_a_timer_a_minute_ahead_waits_the_minute_and_arrives_once(
    make_v5_producer: MakeV5Producer, system_topics: str, start_forwarder, new_topic
) -> None:
    topic = new_topic(partitions=1)
    producer = make_v5_producer()
    start_forwarder()
    deliver_at = now_ms() + 60_000
    producer.send(timer(topic, "a minute later", deliver_at))

    [record] = read_committed(system_topics, topic, 1, timeout=120)

    assert record.value() == b"a minute later"
    assert_never_early([record])


def test_on_an_injected_clock_a_timer_three_days_ahead_hops_until_the_third_day(
    clock_kafka: str,
) -> None:
    topic = create_topic(clock_kafka, partitions=1)
    clock = ManualClock(now_ms())
    producer = Producer(ClientConfiguration(clock_kafka, Credentials()), clock=clock)
    producer.startup()
    forwarder = ScheduleForwarder(
        ForwarderConfig(KafkaSettings(clock_kafka), worker_id=unique("test"), max_wait_ms=100),
        clock=clock,
    )
    deliver_at = clock.now_ms() + 3 * DAY_MS
    try:
        producer.send(timer(topic, "in three days", deliver_at))
        forwarder.drain()
        deadline = time.monotonic() + 120
        while clock.now_ms() < deliver_at - 1:
            assert time.monotonic() < deadline, "the timer hopped to its deliver time in time"
            wakeup = forwarder.heads.next_wakeup_ms()
            if wakeup is not None and wakeup > clock.now_ms():
                clock.advance(min(wakeup, deliver_at - 1) - clock.now_ms())
            forwarder.run_once()
        hops = metric(forwarder, "rmq_schedule_timer_hops_total")
        assert hops >= 35, "2 h at most per hop (and the first)"
        assert read_committed(clock_kafka, topic, 0, timeout=2) == [], "not a ms early"
        clock.advance(1)
        forwarder.drain()
        [record] = read_committed(clock_kafka, topic, 1, timeout=30)
    finally:
        forwarder.close()
        producer.shutdown()
    assert record.value() == b"in three days"
    assert int(header(record, prop.TIMER_DELIVER_MS)) == deliver_at


def test_a_timer_recalled_before_it_is_due_is_never_delivered_and_recalling_again_is_fine(
    make_v5_producer: MakeV5Producer, system_topics: str, start_forwarder, new_topic
) -> None:
    topic = new_topic(partitions=1)
    producer = make_v5_producer()
    forwarder = start_forwarder()
    kept = producer.send(timer(topic, "kept", now_ms() + 2000))
    recalled = producer.send(timer(topic, "recalled", now_ms() + 2000))

    assert producer.recall_message(topic, recalled.recall_handle) == recalled.message_id
    assert producer.recall_message(topic, recalled.recall_handle) == recalled.message_id

    [record] = read_committed(system_topics, topic, 1, timeout=60)
    assert record.value() == b"kept"
    wait_until(
        lambda: metric(forwarder, "rmq_schedule_timer_recalled_total") == 1,
        what="the recalled dropped",
    )
    assert len(read_committed(system_topics, topic, 1, timeout=3)) == 1
    assert kept.message_id != recalled.message_id


def test_a_recall_after_delivery_fails_clearly_and_a_bad_handle_is_refused(
    make_v5_producer: MakeV5Producer, system_topics: str, start_forwarder, new_topic
) -> None:
    topic = new_topic(partitions=1)
    producer = make_v5_producer()
    start_forwarder()
    receipt = producer.send(timer(topic, "soon", now_ms() + 500))
    read_committed(system_topics, topic, 1, timeout=60)

    with pytest.raises(BadRequestException, match="delivered already; cannot recall"):
        producer.recall_message(topic, receipt.recall_handle)
    with pytest.raises(IllegalArgumentException, match="not 'Other'"):
        producer.recall_message("Other", receipt.recall_handle)
    with pytest.raises(IllegalArgumentException, match="is not valid"):
        producer.recall_message(topic, "fake-recall-handle")


def test_of_a_recall_racing_the_delivery_exactly_one_wins_for_every_timer(
    make_v5_producer: MakeV5Producer, system_topics: str, start_forwarder, new_topic
) -> None:
    producer = make_v5_producer()
    start_forwarder()

    def try_recall(topic: str, receipt) -> bool:  # type: ignore[no-untyped-def]
        try:
            producer.recall_message(topic, receipt.recall_handle)
        except BadRequestException as exc:
            if "delivered already" not in str(exc):
                raise
            return False
        return True

    outcomes: set[bool] = set()
    for _ in range(4):  # rounds until the race went both ways: else it was not a race
        topic = new_topic(partitions=1)
        due = now_ms() + 1500
        receipts = [producer.send(timer(topic, f"r{i}", due + 10 * i)) for i in range(30)]
        time.sleep(max(0.0, (due - now_ms()) / 1000 - 0.05))
        with ThreadPoolExecutor(4) as pool:
            won = dict(
                zip(
                    (r.message_id for r in receipts),
                    pool.map(functools.partial(try_recall, topic), receipts),
                    strict=True,
                )
            )
        expected = sum(1 for w in won.values() if not w)
        time.sleep(2)  # anything recalled but delivered would show up by now
        records = read_committed(system_topics, topic, expected, timeout=30)
        delivered = Counter(header(r, prop.UNIQ_KEY).decode() for r in records)
        assert [m for m, n in delivered.items() if n > 1] == [], "none twice"
        assert {m for m, w in won.items() if not w} == set(delivered), (
            "delivered exactly the timers whose recall lost"
        )
        print(f"recall won {sum(won.values())} of {len(won)} races")
        outcomes |= set(won.values())
        if outcomes == {True, False}:
            break
    assert outcomes == {True, False}, "recalls both won and lost: the two really raced"


def test_a_forwarder_killed_mid_burst_of_timers_delivers_each_once_and_never_early(
    make_v5_producer: MakeV5Producer, system_topics: str, new_topic
) -> None:
    topic = new_topic(partitions=2)
    producer = make_v5_producer()
    bodies = [f"t{i}" for i in range(600)]
    start = now_ms()

    def send_burst() -> None:
        futures = [
            producer.send_async(timer(topic, body, start + 1000 + 4 * i))
            for i, body in enumerate(bodies)
        ]
        for future in futures:
            future.result(30)

    first = start_schedule_forwarder(system_topics, unique("killed"))
    sender = threading.Thread(target=send_burst)
    sender.start()
    try:
        wait_until(
            lambda: len(read_committed(system_topics, topic, 100, timeout=1)) >= 100,
            timeout=60,
            what="timers delivered",
        )
    finally:
        first.kill()
        sender.join(60)
    second = start_schedule_forwarder(system_topics, unique("successor"))
    try:
        records = read_committed(system_topics, topic, len(bodies), timeout=120)
    finally:
        assert second.terminate() == 0, "the forwarder stops cleanly on SIGTERM"
    counts = Counter(r.value().decode() for r in records)
    assert set(counts) == set(bodies), "no timer lost"
    assert [b for b, c in counts.items() if c > 1] == [], "no timer twice"
    assert_never_early(records)


def test_a_timer_record_with_foreign_headers_is_parked_with_the_reason_and_timers_go_on(
    make_v5_producer: MakeV5Producer, system_topics: str, start_forwarder, new_topic
) -> None:
    topic = new_topic(partitions=1)
    raw = clients.producer({"bootstrap.servers": system_topics})
    foreign: list = []
    raw.produce(
        naming.kafka_topic(naming.SCHEDULE_TOPIC),
        b"whatever",
        partition=18,  # the 50 ms hop
        headers=[(prop.TIMER_DELIVER_MS, b"tomorrow")],
        on_delivery=lambda _e, m: foreign.append(m),
    )
    assert raw.flush(10) == 0
    make_v5_producer().send(timer(topic, "after the foreign one", now_ms() + 100))
    start_forwarder()

    [record] = read_committed(system_topics, topic, 1)
    assert record.value() == b"after the foreign one"
    [parked] = parked_from(system_topics, 18, foreign[0].offset())
    assert parked.value() == b"whatever", "kept as it was"
    assert dict(parked.headers())["reason"].startswith(b"corrupt: timer headers")


def test_a_recall_against_an_unreachable_kafka_fails_in_its_timeout_naming_the_address() -> None:
    producer = Producer(ClientConfiguration("127.0.0.1:1", Credentials(), request_timeout=2))
    producer.startup()
    try:
        handle = RecallHandle("Orders", "ID", now_ms() + 60_000).encode("unreachable")
        started = time.monotonic()
        with pytest.raises(BadRequestException, match=r"Kafka at 127\.0\.0\.1:1"):
            producer.recall_message("Orders", handle)
        assert time.monotonic() - started < 10, "within its timeout, not a hang"
    finally:
        producer.shutdown()
