"""What TopicFences knows without asking Kafka: what an event loop may rely on."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from adapter.clock import ManualClock
from adapter.transaction.fences import KEEP_S, TopicFences

pytestmark = pytest.mark.timeout(10)


class Unreachable:
    """An admin factory whose Kafka never answers; counts how often it was asked."""

    def __init__(self) -> None:
        self.asked = 0

    def __call__(self) -> None:
        self.asked += 1
        raise KafkaException(KafkaError(KafkaError._TRANSPORT, "no broker"))


def test_a_topic_is_known_from_its_first_lookup_for_a_minute_and_then_asked_again() -> None:
    clock, admin = ManualClock(), Unreachable()
    fences = TopicFences(admin, 1.0, clock)  # type: ignore[arg-type]
    assert not fences.knows("Orders")

    assert fences.of("Orders") is None  # configs unreadable: not fenced
    assert fences.knows("Orders")
    assert not fences.knows("Payments")
    clock.advance(int(KEEP_S * 1000) - 1)
    assert fences.of("Orders") is None
    assert admin.asked == 1, "answered from what it knew"

    clock.advance(1)
    assert not fences.knows("Orders")
    fences.of("Orders")
    assert admin.asked == 2
