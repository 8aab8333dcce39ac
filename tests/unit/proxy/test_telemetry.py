"""The settings the proxy answers a client's Settings with."""

from __future__ import annotations

import pytest

from adapter.proxy.protocol import definition
from adapter.proxy.telemetry import answer_settings

pytestmark = pytest.mark.timeout(10)


def producer_settings(**kwargs: object) -> definition.Settings:
    settings = definition.Settings(client_type=definition.ClientType.PRODUCER, **kwargs)
    settings.publishing.topics.add(name="Orders")
    settings.metric.on = True
    return settings


def test_a_producer_gets_its_topics_the_body_limit_and_type_validation() -> None:
    answer = answer_settings(producer_settings(), max_body_size=4 * 1024 * 1024)
    assert [t.name for t in answer.publishing.topics] == ["Orders"]
    assert answer.publishing.max_body_size == 4 * 1024 * 1024
    assert answer.publishing.validate_message_type
    assert not answer.metric.on


def test_a_producer_without_an_exponential_backoff_gets_three_attempts() -> None:
    policy = answer_settings(producer_settings(), max_body_size=1).backoff_policy
    assert policy.max_attempts == 3
    assert policy.WhichOneof("strategy") == "exponential_backoff"
    assert policy.exponential_backoff.initial.ToMilliseconds() == 10


def test_a_producer_keeps_its_own_exponential_backoff() -> None:
    own = definition.RetryPolicy(max_attempts=7)
    own.exponential_backoff.multiplier = 3.0
    answer = answer_settings(producer_settings(backoff_policy=own), max_body_size=1)
    assert answer.backoff_policy == own
