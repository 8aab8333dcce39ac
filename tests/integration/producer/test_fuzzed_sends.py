"""The send API fuzzed, on a broker: random messages (bodies, tags, keys, properties, delays,
timestamps, FIFO groups) through every send call of both clients. Each is refused with the
client's own error, at a setter or at send, or delivered once, with what was sent."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapter import properties as prop
from adapter import v5
from adapter.client import Message, Producer
from adapter.exceptions import InvalidMessageError, ProducerException
from adapter.schedule.forwarder import ScheduleForwarder
from adapter.v5.exception import IllegalArgumentException
from tests.integration.v5.conftest import MakeV5Producer
from tests.support import ON_A_BROKER, read_committed

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(240)]

CALLS_2_0 = ("send_sync", "send_oneway", "send_orderly_with_sharding_key")
CALLS_5_X = ("send", "send_async")


@dataclass
class Spec:
    """One message to send, as an application would build it."""

    call: str
    body: bytes
    tag: str | None
    keys: list[str]
    properties: list[tuple[str, str]]
    delay: int
    """2.0: the delay level; 5.x: milliseconds ahead for ``delivery_timestamp`` (-1: none)."""
    group: str | None = None
    as_seconds: bool = False
    """5.x: the deliver time written in float seconds, as ``time.time() + n``."""


@dataclass
class Sent:
    """What an accepted message must arrive as."""

    body: bytes
    headers: dict[str, bytes] = field(default_factory=dict)
    properties: dict[str, bytes] = field(default_factory=dict)


names = st.one_of(
    st.text(max_size=8),
    st.sampled_from(sorted(prop.NOT_FOR_USERS)),
    st.sampled_from(["color", "amount", "CHECK_IMMUNITY_TIME_IN_SECONDS"]),
)
specs = st.one_of(
    st.builds(
        Spec,
        call=st.sampled_from(CALLS_2_0),
        body=st.binary(max_size=32),
        tag=st.none() | st.text(max_size=6),
        keys=st.lists(st.text(min_size=1, max_size=6), max_size=3),
        properties=st.lists(st.tuples(names, st.text(max_size=8)), max_size=3),
        delay=st.integers(-1, 1),
    ),
    st.builds(
        Spec,
        call=st.sampled_from(CALLS_5_X),
        body=st.binary(max_size=32),
        tag=st.none() | st.text(max_size=6),
        keys=st.lists(st.text(max_size=6), max_size=3),
        properties=st.lists(st.tuples(names, st.text(max_size=8)), max_size=3),
        delay=st.integers(-1, 1200),
        group=st.none() | st.text(max_size=6),
        as_seconds=st.booleans(),
    ),
)


def blank(text: str) -> bool:
    return not text.strip()


def refused(spec: Spec) -> bool:
    """Whether the client must refuse ``spec``: the rules of RocketMQ's clients."""
    names = [name for name, _ in spec.properties]
    if not spec.body or any(blank(n) or n in prop.NOT_FOR_USERS for n in names):
        return True
    if spec.call in CALLS_2_0:
        return False
    return (
        (spec.tag is not None and (blank(spec.tag) or "|" in spec.tag))
        or any(blank(key) for key in spec.keys)
        or any(blank(value) for _, value in spec.properties)
        or (spec.group is not None and (blank(spec.group) or spec.delay >= 0))
    )


def send_2_0(producer: Producer, topic: str, spec: Spec) -> tuple[str, Sent]:
    message = Message(topic)
    message.set_body(spec.body)
    if spec.tag is not None:
        message.set_tags(spec.tag)
    if spec.keys:
        message.set_keys(spec.keys)
    for name, value in spec.properties:
        message.set_property(name, value)
    message.set_delay_time_level(spec.delay)
    if spec.call == "send_sync":
        msg_id = producer.send_sync(message).msg_id
    elif spec.call == "send_oneway":
        producer.send_oneway(message)
        msg_id = message.unique_key()
    else:
        msg_id = producer.send_orderly_with_sharding_key(message, spec.tag or "key").msg_id
    sent = Sent(spec.body, properties={n: v.encode() for n, v in spec.properties})
    if spec.tag:
        sent.headers[prop.TAGS] = spec.tag.encode()
    if " ".join(spec.keys):
        sent.headers[prop.KEYS] = " ".join(spec.keys).encode()
    return msg_id, sent


def send_5_x(producer: v5.Producer, topic: str, spec: Spec) -> tuple[str, Sent]:
    message = v5.Message()
    message.topic = topic
    message.body = spec.body
    if spec.tag is not None:
        message.tag = spec.tag
    for key in spec.keys:
        message.keys = key
    for name, value in spec.properties:
        message.add_property(name, value)
    if spec.group is not None:
        message.message_group = spec.group
    if spec.delay >= 0:
        ahead_ms = time.time_ns() // 1_000_000 + spec.delay
        message.delivery_timestamp = ahead_ms / 1000 if spec.as_seconds else ahead_ms
    if spec.call == "send":
        receipt = producer.send(message)
    else:
        receipt = producer.send_async(message).result(timeout=30)
    sent = Sent(spec.body, properties={n: v.encode() for n, v in spec.properties})
    if spec.tag is not None:
        sent.headers[prop.TAGS] = spec.tag.encode()
    if spec.keys:
        sent.headers[prop.KEYS] = " ".join(dict.fromkeys(spec.keys)).encode()
    if spec.group is not None:
        sent.headers[prop.SHARDING_KEY] = spec.group.encode()
    return receipt.message_id, sent


@pytest.fixture
def producers(
    make_producer: Callable[..., Producer], make_v5_producer: MakeV5Producer
) -> tuple[Producer, v5.Producer]:
    """One producer of each client for every example of a test."""
    return make_producer(), make_v5_producer()


@pytest.fixture
def forwarder(start_forwarder: Callable[..., ScheduleForwarder]) -> ScheduleForwarder:
    """One schedule forwarder for every example of a test."""
    return start_forwarder()


@settings(ON_A_BROKER)
@given(drawn=st.lists(specs, min_size=4, max_size=12))
def test_every_message_a_send_accepts_is_delivered_once_with_what_was_sent(
    drawn: list[Spec],
    producers: tuple[Producer, v5.Producer],
    forwarder: ScheduleForwarder,
    system_topics: str,
    new_topic: Callable[..., str],
) -> None:
    topic = new_topic(partitions=2)
    old, new = producers
    accepted: dict[str, Sent] = {}
    turned_down: list[Spec] = []
    for spec in drawn:
        try:
            if spec.call in CALLS_2_0:
                msg_id, sent = send_2_0(old, topic, spec)
            else:
                msg_id, sent = send_5_x(new, topic, spec)
        except (InvalidMessageError, ProducerException, IllegalArgumentException):
            turned_down.append(spec)  # refused, with the client's own error
            continue
        accepted[msg_id] = sent
    assert turned_down == [s for s in drawn if refused(s)], "refused exactly what breaks a rule"
    assert old.flush(30) == 0
    assert old.oneway_failures == 0

    records = read_committed(system_topics, topic, len(accepted), timeout=30)

    ids = Counter(dict(r.headers())[prop.UNIQ_KEY].decode() for r in records)
    assert ids == Counter(list(accepted)), "every accepted message once, nothing else"
    for record in records:
        headers = dict(record.headers())
        sent = accepted[headers[prop.UNIQ_KEY].decode()]
        assert record.value() == sent.body
        for name, value in sent.headers.items():
            assert headers.get(name) == value, name
        for name in (prop.TAGS, prop.KEYS, prop.SHARDING_KEY):
            assert name in sent.headers or name not in headers, f"{name} not sent, yet there"
        users = {n: v for n, v in headers.items() if n not in prop.NOT_FOR_USERS}
        assert users == sent.properties, "the user properties, no more, no less"
