"""The schemas topic's publication on a cluster whose system topics are not made yet."""

from __future__ import annotations

import logging

import pytest

from adapter.config import KafkaSettings
from adapter.kafka import schemas
from tests.brokers import Broker

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]


def test_a_missing_schemas_topic_is_said_once_not_at_every_retry(
    own_kafka: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker started before ``topics init`` retries every second; its log says once that
    the schemas topic is missing (the turn's own error already says how to make it)."""
    kafka = KafkaSettings(own_kafka.bootstrap)
    with caplog.at_level(logging.DEBUG, logger=schemas.__name__):
        for _ in range(3):
            assert schemas.install(kafka).wait(30), "each attempt ends"

    said = [r.levelno for r in caplog.records if "schemas not published" in r.getMessage()]
    assert len(said) == 3, "every attempt found the topic missing"
    assert said.count(logging.INFO) <= 1, f"said at info level {said.count(logging.INFO)} times"
