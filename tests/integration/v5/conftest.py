"""Factories for the 5.x client's integration tests: a started ``adapter.v5.Producer``,
``SimpleConsumer``, ``PushConsumer`` and ``LitePushConsumer``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from adapter.v5 import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    LitePushConsumer,
    MessageListener,
    Producer,
    PushConsumer,
    SimpleConsumer,
)
from tests.support import shut_down_after

MakeV5Producer = Callable[..., Producer]


MakeSimpleConsumer = Callable[..., SimpleConsumer]
LOCK_S = 15
"""The shortest share group lock a Kafka 4.3 broker allows: invisible durations up to 12 s."""


@pytest.fixture
def make_simple_consumer(system_topics: str) -> Iterator[MakeSimpleConsumer]:
    """Factory: ``make_simple_consumer(group, {topic: FilterExpression(...)}, **extensions)``,
    a started 5.x ``SimpleConsumer`` on the test broker (share group lock 15 s, long polling
    2 s), shut down after the test unless the test did; ``kind=FifoSimpleConsumer`` for a FIFO
    group's."""
    with shut_down_after() as keep:

        def make(
            group: str,
            subscription: dict[str, FilterExpression],
            await_duration: float = 2,
            *,
            kind: type[SimpleConsumer] = SimpleConsumer,
            **extensions: Any,
        ) -> SimpleConsumer:
            config = ClientConfiguration(system_topics, Credentials())
            extensions.setdefault("lock_duration", LOCK_S)
            consumer = keep(kind(config, group, subscription, await_duration, **extensions))
            consumer.startup()
            return consumer

        yield make


MakePushConsumer = Callable[..., PushConsumer]


@pytest.fixture
def make_push_consumer(system_topics: str) -> Iterator[MakePushConsumer]:
    """Factory: ``make_push_consumer(group, listener, {topic: FilterExpression(...)},
    **extensions)``, a started 5.x ``PushConsumer`` on the test broker, shut down after the
    test unless the test did."""
    with shut_down_after() as keep:

        def make(
            group: str,
            listener: MessageListener,
            subscription: dict[str, FilterExpression],
            **extensions: Any,
        ) -> PushConsumer:
            config = ClientConfiguration(system_topics, Credentials())
            consumer = keep(PushConsumer(config, group, listener, subscription, **extensions))
            consumer.startup()
            return consumer

        yield make


MakeLiteConsumer = Callable[..., LitePushConsumer]


@pytest.fixture
def make_lite_consumer(system_topics: str) -> Iterator[MakeLiteConsumer]:
    """Factory: ``make_lite_consumer(group, bind_topic, listener, **extensions)``, a started
    5.x ``LitePushConsumer`` on the test broker, shut down after the test unless the test
    did."""
    with shut_down_after() as keep:

        def make(
            group: str, bind_topic: str, listener: MessageListener, **extensions: Any
        ) -> LitePushConsumer:
            config = ClientConfiguration(system_topics, Credentials())
            consumer = keep(LitePushConsumer(config, group, bind_topic, listener, **extensions))
            consumer.startup()
            return consumer

        yield make
