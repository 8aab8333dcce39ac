"""Lite topics (RIP-83) on a real broker: a ``LitePushConsumer`` receives only the lite topics it
subscribed, each in send order; a failing message holds back its own lite topic only; a group
resumes a lite topic where it stopped; 10,000 lite topics cost Kafka no topic."""

from __future__ import annotations

import threading
import time
from collections import defaultdict

import pytest
from confluent_kafka.admin import AdminClient

from adapter.v5 import ConsumeResult, Message, MessageListener
from adapter.v5.exception import IllegalStateException, NotFoundException
from tests.integration.v5.conftest import MakeLiteConsumer, MakeV5Producer
from tests.support import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]


class ByLiteTopic(MessageListener):
    """Records the bodies each lite topic delivered, in order; fails the bodies in ``fail``
    as many times as given."""

    def __init__(self, fail: dict[bytes, int] | None = None) -> None:
        self.fail = dict(fail or {})
        self.got: dict[str, list[bytes]] = defaultdict(list)
        self.attempts: list[tuple[bytes, int | None]] = []
        self.lock = threading.Lock()

    def consume(self, message: Message) -> ConsumeResult:
        body = message.body or b""
        with self.lock:
            self.attempts.append((body, message.delivery_attempt))
            if self.fail.get(body, 0) > 0:
                self.fail[body] -= 1
                return ConsumeResult.FAILURE
            self.got[str(message.lite_topic)].append(body)
        return ConsumeResult.SUCCESS

    def count(self) -> int:
        with self.lock:
            return sum(len(bodies) for bodies in self.got.values())


def lite(topic: str, lite_topic: str, body: bytes) -> Message:
    message = Message()
    message.topic, message.lite_topic, message.body = topic, lite_topic, body
    return message


def send_each(producer, topic: str, lites: list[str], per_lite: int) -> None:  # type: ignore[no-untyped-def]
    futures = [
        producer.send_async(lite(topic, name, b"%s %d" % (name.encode(), n)))
        for n in range(per_lite)
        for name in lites
    ]
    for future in futures:
        future.result(timeout=60)


def test_a_consumer_gets_only_its_lite_topics_each_in_send_order(
    make_v5_producer: MakeV5Producer, make_lite_consumer: MakeLiteConsumer, new_topic, new_group
) -> None:
    topic = new_topic(4)
    listener = ByLiteTopic()
    consumer = make_lite_consumer(new_group(), topic, listener)
    for name in ("chat-a", "chat-b"):
        consumer.subscribe_lite(name)

    send_each(make_v5_producer(topic), topic, ["chat-a", "chat-b", "chat-c"], 20)

    wait_until(lambda: listener.count() >= 40, timeout=60, what="chat-a's and chat-b's 40")
    time.sleep(1)  # a chat-c message would arrive now
    assert dict(listener.got) == {
        name: [b"%s %d" % (name.encode(), n) for n in range(20)] for name in ("chat-a", "chat-b")
    }


def test_a_failing_message_is_retried_in_place_holding_back_only_its_lite_topic(
    make_v5_producer: MakeV5Producer, make_lite_consumer: MakeLiteConsumer, new_topic, new_group
) -> None:
    topic = new_topic(1)  # both lite topics in one partition
    listener = ByLiteTopic(fail={b"slow 0": 2})
    consumer = make_lite_consumer(new_group(), topic, listener)
    consumer.subscribe_lite("slow")
    consumer.subscribe_lite("fast")

    send_each(make_v5_producer(topic), topic, ["slow", "fast"], 3)

    wait_until(lambda: listener.count() >= 6, timeout=60, what="every message")
    assert listener.got["slow"] == [b"slow 0", b"slow 1", b"slow 2"]
    assert [a for body, a in listener.attempts if body == b"slow 0"] == [1, 2, 3]
    first_slow_success = listener.attempts.index((b"slow 0", 3))
    assert listener.attempts.index((b"fast 2", 1)) < first_slow_success, "fast went on"


def test_a_group_resumes_a_lite_topic_where_it_stopped(
    make_v5_producer: MakeV5Producer, make_lite_consumer: MakeLiteConsumer, new_topic, new_group
) -> None:
    topic, group = new_topic(2), new_group()
    producer = make_v5_producer(topic)
    first = ByLiteTopic()
    consumer = make_lite_consumer(group, topic, first)
    consumer.subscribe_lite("session")
    send_each(producer, topic, ["session"], 3)
    wait_until(lambda: first.count() >= 3, timeout=60, what="the first three")
    consumer.shutdown()

    send_each(producer, topic, ["later"], 1)  # nobody's: not waited for
    producer.send(lite(topic, "session", b"while away"))
    again = ByLiteTopic()
    make_lite_consumer(group, topic, again).subscribe_lite("session")

    wait_until(lambda: again.count() >= 1, timeout=60, what="the message sent while away")
    time.sleep(1)
    assert again.got == {"session": [b"while away"]}


def test_a_lite_topic_belongs_to_the_consumer_of_its_group_that_subscribed_it_last(
    make_v5_producer: MakeV5Producer, make_lite_consumer: MakeLiteConsumer, new_topic, new_group
) -> None:
    topic, group = new_topic(2), new_group()
    first, second = ByLiteTopic(), ByLiteTopic()
    earlier = make_lite_consumer(group, topic, first)
    earlier.subscribe_lite("session")
    earlier.subscribe_lite("kept")
    later = make_lite_consumer(group, topic, second)
    later.subscribe_lite("session")

    wait_until(lambda: earlier.lite_topics == {"kept"}, timeout=30, what="the hand-over")
    assert later.lite_topics == {"session"}
    send_each(make_v5_producer(topic), topic, ["session", "kept"], 5)

    wait_until(lambda: first.count() + second.count() >= 10, timeout=60, what="10 messages")
    time.sleep(1)
    assert dict(second.got) == {"session": [b"session %d" % n for n in range(5)]}
    assert dict(first.got) == {"kept": [b"kept %d" % n for n in range(5)]}


@pytest.mark.long
def test_ten_thousand_lite_topics_are_no_kafka_topics_and_each_keeps_its_order(
    make_v5_producer: MakeV5Producer,
    make_lite_consumer: MakeLiteConsumer,
    admin: AdminClient,
    new_topic,
    new_group,
) -> None:
    topic = new_topic(4)
    topics_before = set(admin.list_topics(timeout=10).topics)
    listener = ByLiteTopic()
    consumer = make_lite_consumer(new_group(), topic, listener)
    mine = [f"agent-{n}" for n in range(10_000)]
    started = time.monotonic()
    for name in mine:
        consumer.subscribe_lite(name)
    subscribe_s = time.monotonic() - started

    producer = make_v5_producer(topic)
    send_each(producer, topic, mine, 2)
    send_each(producer, topic, [f"other-{n}" for n in range(1_000)], 1)

    wait_until(lambda: listener.count() >= 20_000, timeout=90, what="20,000 messages")
    time.sleep(1)
    assert listener.count() == 20_000, "nothing of the unsubscribed lite topics"
    assert all(
        listener.got[name] == [b"%s 0" % name.encode(), b"%s 1" % name.encode()] for name in mine
    )
    new_topics = set(admin.list_topics(timeout=10).topics) - topics_before
    assert new_topics <= {"RMQ_SYS_LITE_PROGRESS"}, "no Kafka topic per lite topic"
    print(f"subscribed 10,000 lite topics in {subscribe_s:.2f} s")


def test_lite_subscriptions_need_a_running_consumer_and_a_bind_topic_that_exists(
    make_lite_consumer: MakeLiteConsumer, new_topic, new_group
) -> None:
    with pytest.raises(NotFoundException, match="does not exist"):
        make_lite_consumer(new_group(), "NoSuchParent", ByLiteTopic())
    consumer = make_lite_consumer(new_group(), new_topic(1), ByLiteTopic())
    with pytest.raises(IllegalStateException, match="max length"):
        consumer.subscribe_lite("x" * 65)
    with pytest.raises(NotImplementedError):
        consumer.subscribe("AnyTopic")
    consumer.shutdown()
    with pytest.raises(IllegalStateException, match="not running"):
        consumer.subscribe_lite("late")
