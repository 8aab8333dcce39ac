"""Delivery timestamps of every kind through the 5.x producer, on a broker: ints, floats, bools,
negative values, and values in s, ms, µs and ns. Each is refused (at the setter or at send)
or delivered once, never before the time it names."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapter import properties as prop
from adapter.schedule.forwarder import ScheduleForwarder
from adapter.v5 import Message, Producer
from adapter.v5.exception import IllegalArgumentException
from tests.integration.v5.conftest import MakeV5Producer
from tests.support import ON_A_BROKER, read_committed

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(240)]

UNITS = {"s": 1e-3, "ms": 1.0, "µs": 1e3, "ns": 1e6}
"""How many of each unit a millisecond holds."""


@dataclass(frozen=True)
class Stamp:
    """A way to write a deliver time: its unit, its Python type, and how far ahead it lies."""

    unit: str
    kind: str  # "int", "float", "bool" or "negative"
    ahead_ms: int
    fraction: float

    def value(self, now_ms: int) -> object:
        """The value an application would assign, written now."""
        if self.kind == "bool":
            return self.ahead_ms >= 0
        exact = (now_ms + self.ahead_ms) * UNITS[self.unit]
        if self.kind == "float":
            return exact + self.fraction
        return int(exact) if self.kind == "int" else -int(exact)

    @property
    def refused(self) -> bool:
        """Whether the adapter must refuse it: not an epoch time in s or ms."""
        return self.kind in ("bool", "negative") or self.unit in ("µs", "ns")


stamps = st.builds(
    Stamp,
    unit=st.sampled_from(list(UNITS)),
    kind=st.sampled_from(["int", "float", "bool", "negative"]),
    ahead_ms=st.integers(-3000, 1500),
    fraction=st.floats(0, 0.999),
)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@pytest.fixture
def producer(make_v5_producer: MakeV5Producer) -> Producer:
    """One producer for every example of a test."""
    return make_v5_producer()


@pytest.fixture
def forwarder(start_forwarder: Callable[..., ScheduleForwarder]) -> ScheduleForwarder:
    """One schedule forwarder for every example of a test."""
    return start_forwarder()


@settings(ON_A_BROKER)
@given(drawn=st.lists(stamps, min_size=6, max_size=10))
def test_every_delivery_timestamp_is_refused_or_delivered_once_never_early(
    drawn: list[Stamp],
    producer: Producer,
    forwarder: ScheduleForwarder,
    system_topics: str,
    new_topic: Callable[..., str],
) -> None:
    topic = new_topic(partitions=1)
    refused: list[Stamp] = []
    sent: dict[str, tuple[Stamp, int]] = {}
    for i, stamp in enumerate(drawn):
        message = Message()
        message.topic = topic
        message.body = f"{i} {stamp}".encode()
        try:
            message.delivery_timestamp = stamp.value(now_ms())  # type: ignore[assignment]
            receipt = producer.send(message)
        except IllegalArgumentException:
            refused.append(stamp)
            continue
        sent[message.body.decode()] = (stamp, int(message.delivery_timestamp or 0))
        assert receipt.message_id == message.message_id

    assert refused == [s for s in drawn if s.refused], "refused exactly what is no time"
    records = read_committed(system_topics, topic, len(sent), timeout=30)
    bodies = Counter(r.value().decode() for r in records)
    assert bodies == Counter(list(sent)), "every accepted timer delivered, once"
    for record in records:
        _, deliver_ms = sent[record.value().decode()]
        stored = dict(record.headers()).get(prop.TIMER_DELIVER_MS)
        _, written_ms = record.timestamp()
        if stored is not None:
            assert int(stored) == deliver_ms, "the deliver time as whole milliseconds"
            assert written_ms >= deliver_ms, "never early"
