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


def consumer_settings(kind: int, **subscription: object) -> definition.Settings:
    settings = definition.Settings(client_type=kind)
    settings.subscription.group.name = "GID_orders"
    for name, value in subscription.items():
        setattr(settings.subscription, name, value)
    return settings


@pytest.mark.parametrize(
    "kind", [definition.ClientType.PUSH_CONSUMER, definition.ClientType.SIMPLE_CONSUMER]
)
def test_a_consumer_gets_its_groups_retry_policy_of_17_attempts_and_the_delay_levels(
    kind: int,
) -> None:
    policy = answer_settings(consumer_settings(kind), max_body_size=1).backoff_policy
    assert policy.max_attempts == 17
    assert [d.ToMilliseconds() for d in policy.customized_backoff.next][:4] == [
        1_000,
        5_000,
        10_000,
        30_000,
    ], "a push consumer's first failed delivery comes back after 1 s, as from RocketMQ's proxy"
    assert len(policy.customized_backoff.next) == 18


def test_a_consumer_is_told_its_group_is_not_fifo_with_a_batch_and_a_bounded_long_poll() -> None:
    sent = consumer_settings(definition.ClientType.PUSH_CONSUMER, fifo=True)
    sent.subscription.long_polling_timeout.seconds = 3600
    subscription = answer_settings(sent, max_body_size=1).subscription
    assert not subscription.fifo, "a group not named FIFO: a share group, in no order"
    assert subscription.receive_batch_size == 32
    assert subscription.long_polling_timeout.seconds == 20
    sent.subscription.long_polling_timeout.seconds = 25
    kept = answer_settings(sent, max_body_size=1).subscription
    assert kept.long_polling_timeout.seconds == 25
    assert kept.group.name == "GID_orders"


def test_a_group_named_fifo_is_told_so_with_its_namespace() -> None:
    sent = consumer_settings(definition.ClientType.PUSH_CONSUMER)
    sent.subscription.group.resource_namespace = "shopA"
    fifo = frozenset({"shopA%GID_orders"})
    assert answer_settings(sent, max_body_size=1, fifo_groups=fifo).subscription.fifo
    sent.subscription.group.resource_namespace = ""
    assert not answer_settings(sent, max_body_size=1, fifo_groups=fifo).subscription.fifo
