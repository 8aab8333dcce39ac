"""The 5.x ``SimpleConsumer`` on a real broker's share group: receive and ack, redelivery after
the invisible duration (never before, to this consumer or another of the group), a holder killed
with SIGKILL, change_invisible_duration, shutdown, the dead-letter topic after max attempts, tag
filters, group names, and committed transactional messages only."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from adapter import naming
from adapter.kafka import clients
from adapter.v5 import FilterExpression, Message, SimpleConsumer
from adapter.v5.exception import BadRequestException, IllegalStateException
from tests.integration.v5.conftest import LOCK_S, MakeSimpleConsumer, MakeV5Producer
from tests.support import read_committed, wait_until
from tests.workers import start_worker

pytestmark = pytest.mark.timeout(120)

EVERYTHING = FilterExpression()


def message(topic: str, body: bytes, tag: str | None = None) -> Message:
    out = Message()
    out.topic = topic
    out.body = body
    if tag is not None:
        out.tag = tag
    return out


def dead_letters(bootstrap: str, group: str) -> list[object]:
    """The records of the group's dead-letter topic (none while it does not exist)."""
    dlq = naming.kafka_topic(naming.dlq_topic(group))
    if dlq not in clients.admin({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics:
        return []
    return list(read_committed(bootstrap, naming.dlq_topic(group), expected=0, timeout=5))


def receive_one(consumer: SimpleConsumer, invisible_s: float, timeout: float = 30) -> Message:
    """The next message the consumer receives (failing the test after ``timeout``)."""
    got = wait_until(lambda: consumer.receive(1, invisible_s), timeout=timeout, what="a message")
    assert len(got) == 1
    return got[0]


def test_a_received_and_acked_message_is_delivered_once(
    make_v5_producer: MakeV5Producer, make_simple_consumer: MakeSimpleConsumer, new_topic, new_group
) -> None:
    topic = new_topic(2)
    sent = message(topic, b"order 42", "Paid")
    sent.keys = "order-42"
    sent.add_property("amount", "30")
    receipt = make_v5_producer().send(sent)
    consumer = make_simple_consumer(new_group(), {topic: EVERYTHING})

    got = receive_one(consumer, invisible_s=10)
    consumer.ack(got)

    assert (got.topic, got.body, got.tag, got.keys) == (topic, b"order 42", "Paid", {"order-42"})
    assert got.properties == {"amount": "30"}
    assert got.message_id == receipt.message_id
    assert got.delivery_attempt == 1
    assert consumer.receive(10, 10) == []  # nothing more within the 2 s long poll
    with pytest.raises(BadRequestException, match="invalid or expired"):
        consumer.ack(got)  # a second ack of the same delivery


@pytest.mark.long  # half a minute: four threads, each waiting for the others to join
def test_four_threads_acking_at_once_share_commits_and_each_message_is_delivered_once(
    make_v5_producer: MakeV5Producer, make_simple_consumer: MakeSimpleConsumer, new_topic, new_group
) -> None:
    topic = new_topic(2)
    producer = make_v5_producer()
    sent = {producer.send(message(topic, f"m{i}".encode())).message_id for i in range(200)}
    consumer = make_simple_consumer(new_group(), {topic: EVERYTHING})
    acked: list[str] = []
    lock = threading.Lock()
    deadline = time.monotonic() + 60

    def receive_and_ack() -> None:
        while time.monotonic() < deadline:
            with lock:
                if len(acked) >= len(sent):
                    return
            for got in consumer.receive(16, 10):
                consumer.ack(got)  # returns once Kafka took it, shared commit or not
                with lock:
                    acked.append(got.message_id)

    threads = [threading.Thread(target=receive_and_ack) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)

    assert sorted(acked) == sorted(sent), "every message acked, once"
    time.sleep(LOCK_S + 1)  # a message whose ack was lost would be delivered again by now
    assert consumer.receive(32, 10) == [], "nothing comes back"


def test_a_receive_never_polls_the_share_consumer_another_thread_still_acks(
    make_simple_consumer: MakeSimpleConsumer,
    new_topic,
    new_group,
    system_topics: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One share consumer, four threads receiving two messages at a time: the records of
    one poll are acked by several threads at once, and librdkafka refuses a poll while one
    of them is unacknowledged."""
    topic = new_topic(1)
    consumer = make_simple_consumer(new_group(), {topic: EVERYTHING}, max_consumers=1)
    raw = clients.producer({"bootstrap.servers": system_topics})

    def trickle() -> None:  # a few records a poll: many polls, each acked by several threads
        for n in range(300):
            raw.produce(naming.kafka_topic(topic), f"m{n}".encode())
            raw.flush(10)
            time.sleep(0.01)

    threading.Thread(target=trickle, daemon=True).start()
    acked: list[bytes] = []
    lock = threading.Lock()
    deadline = time.monotonic() + 60

    def receive_and_ack() -> None:
        while time.monotonic() < deadline and len(acked) < 300:
            for got in consumer.receive(2, 10):
                consumer.ack(got)
                with lock:
                    acked.append(got.body)

    threads = [threading.Thread(target=receive_and_ack) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)

    assert "refused a poll" not in caplog.text
    assert len(acked) == len(set(acked)) == 300


def test_receive_returns_at_most_the_asked_count_and_the_async_variants_work(
    make_v5_producer: MakeV5Producer, make_simple_consumer: MakeSimpleConsumer, new_topic, new_group
) -> None:
    topic = new_topic(1)
    producer = make_v5_producer()
    for n in range(3):
        producer.send(message(topic, f"m{n}".encode()))
    consumer = make_simple_consumer(new_group(), {topic: EVERYTHING})

    batches: list[list[Message]] = []

    def received_all() -> bool:
        got = consumer.receive_async(2, 10).result(timeout=30)
        if got:
            batches.append(got)
        return sum(len(batch) for batch in batches) >= 3

    wait_until(received_all, timeout=40, what="three messages")
    for batch in batches:
        for got in batch:
            assert consumer.ack_async(got).result(timeout=10) is None

    assert all(1 <= len(batch) <= 2 for batch in batches)
    bodies = sorted(got.body for batch in batches for got in batch)
    assert bodies == [b"m0", b"m1", b"m2"]
    assert consumer.receive(10, 10) == []


def test_a_message_not_acked_comes_back_after_its_invisible_duration_and_not_before(
    make_v5_producer: MakeV5Producer, make_simple_consumer: MakeSimpleConsumer, new_topic, new_group
) -> None:
    topic = new_topic(1)
    make_v5_producer().send(message(topic, b"forgotten"))
    consumer = make_simple_consumer(new_group(), {topic: EVERYTHING})

    first = receive_one(consumer, invisible_s=4)
    received_at = time.monotonic()
    again = receive_one(consumer, invisible_s=10)
    back_after = time.monotonic() - received_at
    consumer.ack(again)

    print(f"redelivered {back_after:.2f} s after the first receive (invisible 4 s)")
    assert back_after >= 4
    # The release is at 4 s; the poll that picks it up may wait for a second share consumer
    # joining the group (the first was holding the message). Kafka's own lock ends at 15 s.
    assert back_after < 4 + 15
    assert again.message_id == first.message_id
    assert (first.delivery_attempt, again.delivery_attempt) == (1, 2)
    with pytest.raises(BadRequestException, match="invalid or expired"):
        consumer.ack(first)  # the first delivery's handle went back with it


def test_another_consumer_of_the_group_gets_a_held_message_only_after_its_invisible_duration(
    make_v5_producer: MakeV5Producer, make_simple_consumer: MakeSimpleConsumer, new_topic, new_group
) -> None:
    topic, group = new_topic(1), new_group()
    make_v5_producer().send(message(topic, b"held by the first"))
    first = make_simple_consumer(group, {topic: EVERYTHING})
    held = receive_one(first, invisible_s=10)
    received_at = time.monotonic()
    second = make_simple_consumer(group, {topic: EVERYTHING})

    again = receive_one(second, invisible_s=10, timeout=30)
    back_after = time.monotonic() - received_at
    second.ack(again)

    print(f"the second consumer got it {back_after:.2f} s after the first received it")
    assert back_after >= 10
    assert (again.message_id, again.delivery_attempt) == (held.message_id, 2)
    with pytest.raises(BadRequestException, match="invalid or expired"):
        first.ack(held)


def test_a_message_held_by_a_consumer_killed_with_sigkill_comes_back_to_the_group(
    make_v5_producer: MakeV5Producer,
    make_simple_consumer: MakeSimpleConsumer,
    new_topic,
    new_group,
    system_topics: str,
) -> None:
    """Not lost, and counted as a delivery. Kafka releases a dead member's records when its
    connection closes, before their invisible duration ends (docs/v5.md: a documented difference
    from RocketMQ, which the client cannot prevent); the test prints how soon."""
    topic, group = new_topic(1), new_group()
    survivor = make_simple_consumer(group, {topic: EVERYTHING}, await_duration=6)
    assert survivor.receive(1, 10) == []  # joined the group
    dying = start_worker(
        "process", "tests.procs.simple_receive_and_hold", system_topics, group, topic, "10"
    )
    dying.wait_for_output("started", timeout=30)
    receipt = make_v5_producer().send(message(topic, b"held by a dying consumer"))
    dying.wait_for_output(f"holding {receipt.message_id}", timeout=40)
    [held] = [line for line in dying.lines if line.startswith(f"holding {receipt.message_id}")]
    held_attempt = int(held.split()[-1])
    dying.kill()
    killed_at = time.monotonic()

    survivor.await_duration = 1
    again = receive_one(survivor, invisible_s=10, timeout=40)
    survivor.ack(again)

    print(f"back {time.monotonic() - killed_at:.2f} s after the kill (invisible 10 s)")
    assert again.message_id == receipt.message_id
    assert again.delivery_attempt is not None
    # The dying consumer's delivery counts. Each process leaves out only the fetches it
    # released unseen itself, so the survivor's count need not exceed the dying one's.
    assert again.delivery_attempt >= 2
    assert held_attempt >= 1


def test_change_invisible_duration_postpones_or_ends_the_invisibility(
    make_v5_producer: MakeV5Producer, make_simple_consumer: MakeSimpleConsumer, new_topic, new_group
) -> None:
    topic = new_topic(1)
    make_v5_producer().send(message(topic, b"slow work"))
    consumer = make_simple_consumer(new_group(), {topic: EVERYTHING})
    got = receive_one(consumer, invisible_s=8)
    time.sleep(3)

    with pytest.raises(BadRequestException, match="cannot be renewed"):
        consumer.change_invisible_duration(got, 12)  # 3 + 12 s: past Kafka's 15 s lock on it
    consumer.change_invisible_duration(got, 7)
    changed_at = time.monotonic()
    again = receive_one(consumer, invisible_s=5)
    back_after = time.monotonic() - changed_at
    consumer.change_invisible_duration(again, 0)  # back at once
    third = receive_one(consumer, invisible_s=5, timeout=10)
    consumer.ack(third)

    print(f"redelivered {back_after:.2f} s after the change to 7 s (3 s after receiving it)")
    assert back_after >= 7
    assert (got.delivery_attempt, again.delivery_attempt, third.delivery_attempt) == (1, 2, 3)


def test_a_message_past_the_groups_max_attempts_goes_to_the_dead_letter_topic(
    make_v5_producer: MakeV5Producer,
    make_simple_consumer: MakeSimpleConsumer,
    new_topic,
    new_group,
    system_topics: str,
) -> None:
    topic, group = new_topic(1), new_group()
    receipt = make_v5_producer().send(message(topic, b"poison", "Bad"))
    consumer = make_simple_consumer(group, {topic: EVERYTHING}, max_attempts=2)

    for attempt in (1, 2):
        got = receive_one(consumer, invisible_s=5)
        assert got.delivery_attempt == attempt
        consumer.change_invisible_duration(got, 0)  # fails: back at once
    assert consumer.receive(1, 5) == []  # the third delivery went to the dead-letter topic

    dead = read_committed(system_topics, naming.dlq_topic(group), expected=1, timeout=20)
    assert len(dead) == 1
    headers = {k: bytes(v).decode() for k, v in dead[0].headers() or []}
    assert dead[0].value() == b"poison"
    assert headers["UNIQ_KEY"] == receipt.message_id
    assert headers["TAGS"] == "Bad"
    assert headers["RETRY_TOPIC"] == topic
    assert headers["RECONSUME_TIME"] == "2"


def test_a_message_with_binary_headers_past_its_max_attempts_reaches_the_dlq_with_its_bytes(
    make_simple_consumer: MakeSimpleConsumer, new_topic, new_group, system_topics: str
) -> None:
    topic, group = new_topic(1), new_group()
    spring = b"\x00\x00\x00\x00\x00\x00\x01\xc8"
    raw = clients.producer({"bootstrap.servers": system_topics})
    headers = [("UNIQ_KEY", b"BIN-5"), ("kafka_dlt-original-offset", spring), ("TAGS", b"\xfe")]
    raw.produce(naming.kafka_topic(topic), b"binary", headers=headers)
    assert raw.flush(30) == 0
    consumer = make_simple_consumer(group, {topic: EVERYTHING}, max_attempts=1)

    got = receive_one(consumer, invisible_s=5)
    consumer.change_invisible_duration(got, 0)  # fails: back at once, past its one attempt
    assert consumer.receive(1, 5) == []

    [dead] = read_committed(system_topics, naming.dlq_topic(group), expected=1, timeout=20)
    kept = dict(dead.headers() or [])
    assert dead.value() == b"binary"
    assert (kept["kafka_dlt-original-offset"], kept["TAGS"]) == (spring, b"\xfe")
    assert kept["rmq.dlq_reason"] == b"delivered 1 times without an ack (max attempts 1)"


@pytest.mark.timeout(120)
@pytest.mark.long  # about a minute: a receive a second
def test_one_message_a_second_from_a_backlog_of_2000_none_is_dead_lettered_unseen(
    make_simple_consumer: MakeSimpleConsumer, new_topic, new_group, system_topics: str
) -> None:
    """Kafka acquires whole record batches (here one of 2,000), so most records of a fetch go
    back unseen when their lock ends, and Kafka counts each fetch. Over three 15 s locks, with
    at most 2 attempts, none may reach the dead-letter topic and each shown is a first
    delivery."""
    topic, group = new_topic(1), new_group()
    raw = clients.producer({"bootstrap.servers": system_topics, "linger.ms": 50})
    for n in range(2000):
        raw.produce(naming.kafka_topic(topic), f"m{n}".encode())
    assert raw.flush(30) == 0
    consumer = make_simple_consumer(group, {topic: EVERYTHING}, max_attempts=2)

    attempts: list[int] = []
    deadline = time.monotonic() + 3 * LOCK_S + 5
    while time.monotonic() < deadline:
        started = time.monotonic()
        for got in consumer.receive(1, 5):
            attempts.append(got.delivery_attempt or 0)
            consumer.ack(got)
        time.sleep(max(0.0, 1 - (time.monotonic() - started)))

    print(f"received {len(attempts)}, attempts shown {sorted(set(attempts))}")
    assert len(attempts) >= 20
    assert set(attempts) == {1}, "each message received was a first delivery"
    assert dead_letters(system_topics, group) == [], "nothing was dead-lettered unseen"


def test_shutdown_waits_for_a_held_message_which_can_still_be_acked(
    make_v5_producer: MakeV5Producer, make_simple_consumer: MakeSimpleConsumer, new_topic, new_group
) -> None:
    topic, group = new_topic(1), new_group()
    make_v5_producer().send(message(topic, b"in hand at shutdown"))
    consumer = make_simple_consumer(group, {topic: EVERYTHING})
    held = receive_one(consumer, invisible_s=10)

    stopping = threading.Thread(target=consumer.shutdown)
    stopping.start()
    time.sleep(1)
    assert stopping.is_alive()  # waiting for the message in hand
    with pytest.raises(IllegalStateException, match="not running"):
        consumer.receive(1, 5)
    consumer.ack(held)
    stopping.join(10)

    assert not stopping.is_alive()
    after = make_simple_consumer(group, {topic: EVERYTHING}, await_duration=8)
    assert after.receive(1, 5) == []  # acked: never delivered again


def test_a_tag_filter_receives_only_the_tags_it_names(
    make_v5_producer: MakeV5Producer, make_simple_consumer: MakeSimpleConsumer, new_topic, new_group
) -> None:
    topic = new_topic(1)
    producer = make_v5_producer()
    for body, tag in ((b"a", "TagA"), (b"b", "TagB"), (b"c", "TagC"), (b"none", None)):
        producer.send(message(topic, body, tag))
    consumer = make_simple_consumer(new_group(), {topic: FilterExpression("TagA||TagC")})

    seen: list[Message] = []

    def received_two() -> bool:
        seen.extend(consumer.receive(10, 10))
        return len(seen) >= 2

    wait_until(received_two, timeout=30, what="the tagged messages")
    seen.extend(consumer.receive(10, 10))
    for got in seen:
        consumer.ack(got)
    assert sorted((m.body, m.tag) for m in seen) == [(b"a", "TagA"), (b"c", "TagC")]


def test_a_sql92_filter_receives_only_the_matching_properties_and_consumes_the_rest(
    make_v5_producer: MakeV5Producer, make_simple_consumer: MakeSimpleConsumer, new_topic, new_group
) -> None:
    from adapter.v5 import FilterType

    topic, group = new_topic(1), new_group()
    producer = make_v5_producer()
    for body, region in ((b"eu1", "eu"), (b"us", "us"), (b"none", None), (b"eu2", "eu")):
        sent = message(topic, body, "TagA")
        if region is not None:
            sent.add_property("region", region)
        producer.send(sent)
    sql = FilterExpression("region IN ('eu', 'asia') AND TAGS IS NOT NULL", FilterType.SQL)
    consumer = make_simple_consumer(group, {topic: sql})

    seen: list[Message] = []

    def received_two() -> bool:
        seen.extend(consumer.receive(10, 10))
        return len(seen) >= 2

    wait_until(received_two, timeout=30, what="the eu messages")
    wait_until(lambda: consumer.filtered >= 2, timeout=30, what="us and none filtered out")
    for got in seen:
        consumer.ack(got)
    assert sorted(m.body for m in seen) == [b"eu1", b"eu2"]
    assert consumer.filtered == 2
    consumer.shutdown()
    after = make_simple_consumer(group, {topic: EVERYTHING}, await_duration=5)
    assert after.receive(10, 5) == []  # the filtered ones were consumed: never come back


def test_a_bad_sql92_filter_is_refused_at_subscribe_with_its_column(
    make_simple_consumer: MakeSimpleConsumer, new_topic, new_group
) -> None:
    from adapter.v5 import FilterType

    topic = new_topic(1)
    consumer = make_simple_consumer(new_group(), {topic: EVERYTHING})
    with pytest.raises(BadRequestException, match="column 9"):
        consumer.subscribe(topic, FilterExpression("a > 1 OR", FilterType.SQL))


def test_subscribing_to_a_topic_that_does_not_exist_is_not_found(
    make_simple_consumer: MakeSimpleConsumer, new_topic, new_group, admin
) -> None:
    from adapter.v5.exception import NotFoundException

    consumer = make_simple_consumer(new_group(), {new_topic(1): EVERYTHING})
    missing = new_group("NoSuchTopic")

    with pytest.raises(NotFoundException, match="does not exist"):
        consumer.subscribe(missing)
    assert naming.kafka_topic(missing) not in admin.list_topics(timeout=10).topics


def test_a_group_name_a_2_0_push_consumer_uses_is_refused_at_startup(
    make_consumer, make_simple_consumer: MakeSimpleConsumer, new_topic, new_group
) -> None:
    topic, group = new_topic(1), new_group()
    push = make_consumer(group, topic, lambda message: None)
    wait_until(push.assigned_queues, timeout=30, what="the push consumer's queues")

    with pytest.raises(IllegalStateException, match="name of a Kafka consumer group"):
        make_simple_consumer(group, {topic: EVERYTHING})


def test_only_committed_transactional_messages_are_received(
    make_simple_consumer: MakeSimpleConsumer,
    new_topic: Callable[..., str],
    new_group,
    system_topics: str,
) -> None:
    topic = new_topic(1)
    kafka_topic = naming.kafka_topic(topic)
    producer = clients.producer(
        {"bootstrap.servers": system_topics, "transactional.id": f"tx-{topic}"}
    )
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(kafka_topic, b"rolled back", headers=[("UNIQ_KEY", b"aborted-1")])
    producer.abort_transaction(10)
    producer.begin_transaction()
    producer.produce(kafka_topic, b"committed", headers=[("UNIQ_KEY", b"committed-1")])
    producer.commit_transaction(10)
    consumer = make_simple_consumer(new_group(), {topic: EVERYTHING})

    got = receive_one(consumer, invisible_s=10)
    consumer.ack(got)

    assert (got.body, got.message_id) == (b"committed", "committed-1")
    assert consumer.receive(10, 10) == []
