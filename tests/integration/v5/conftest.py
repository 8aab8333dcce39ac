"""Factories for the 5.x client's integration tests: a started ``adapter.v5.Producer``."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from adapter.v5 import ClientConfiguration, Credentials, Producer, TransactionChecker

MakeV5Producer = Callable[..., Producer]


@pytest.fixture
def make_v5_producer(system_topics: str) -> Iterator[MakeV5Producer]:
    """Factory: ``make_v5_producer(*topics, checker=None)``, a started 5.x producer on the test
    broker (its system topics created), shut down after the test unless the test did."""
    producers: list[Producer] = []

    def make(*topics: str, checker: TransactionChecker | None = None) -> Producer:
        config = ClientConfiguration(system_topics, Credentials())
        producer = Producer(config, topics, checker=checker)
        producer.startup()
        producers.append(producer)
        return producer

    yield make
    for producer in producers:
        if producer.is_running:
            producer.shutdown()
