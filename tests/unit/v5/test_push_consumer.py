"""What a 5.x ``PushConsumer`` refuses before it reaches Kafka, which listener answers consume
a message, and how long a failed one waits."""

from __future__ import annotations

import pytest

from adapter.delay import DelayLevels
from adapter.v5 import (
    ClientConfiguration,
    ConsumeResult,
    Credentials,
    FilterExpression,
    FilterType,
    MessageListener,
    PushConsumer,
)
from adapter.v5.exception import (
    BadRequestException,
    IllegalArgumentException,
)
from adapter.v5.message_listener import is_success
from adapter.v5.push_consumer import retry_delay_s

pytestmark = pytest.mark.timeout(30)

CONFIG = ClientConfiguration("127.0.0.1:9", Credentials())


class Accepting(MessageListener):
    def consume(self, message: object) -> ConsumeResult:
        return ConsumeResult.SUCCESS


def test_only_success_consumes_a_message() -> None:
    assert is_success(ConsumeResult.SUCCESS)
    assert not is_success(ConsumeResult.FAILURE)
    assert not is_success(None)
    assert not is_success(True)


def test_a_failed_delivery_waits_its_attempt_s_delay_level_as_rocketmq_s_proxy_says() -> None:
    levels = DelayLevels.parse("1s 5s 10s")

    assert [retry_delay_s(n, levels) for n in (1, 2, 3, 4, 16)] == [1.0, 5.0, 10.0, 10.0, 10.0]


def test_a_listener_and_a_subscription_are_required_as_in_5x() -> None:
    with pytest.raises(IllegalArgumentException, match="message_listener"):
        PushConsumer(CONFIG, "GID_a", None, {"T": FilterExpression()})  # type: ignore[arg-type]
    with pytest.raises(IllegalArgumentException, match="subscription"):
        PushConsumer(CONFIG, "GID_a", Accepting(), {})


def test_a_bad_sql92_expression_is_refused_with_its_column() -> None:
    bad = FilterExpression("a > 1 AND", FilterType.SQL)
    with pytest.raises(BadRequestException, match="column 10"):
        PushConsumer(CONFIG, "GID_a", Accepting(), {"T": bad})


def test_a_malformed_tag_expression_is_refused() -> None:
    with pytest.raises(BadRequestException):
        PushConsumer(CONFIG, "GID_a", Accepting(), {"T": FilterExpression("A | B")})


def test_a_bad_topic_name_is_refused() -> None:
    with pytest.raises(IllegalArgumentException, match="cannot subscribe"):
        PushConsumer(CONFIG, "GID_a", Accepting(), {"bad topic!": FilterExpression()})


def test_max_delivery_attempts_must_be_one_or_more() -> None:
    with pytest.raises(IllegalArgumentException, match="max_delivery_attempts"):
        PushConsumer(
            CONFIG, "GID_a", Accepting(), {"T": FilterExpression()}, max_delivery_attempts=0
        )


def test_shutdown_of_a_consumer_that_never_started_only_warns_as_in_5x(caplog) -> None:
    consumer = PushConsumer(CONFIG, "GID_a", Accepting(), {"T": FilterExpression()})
    consumer.shutdown()
    assert not consumer.is_running
    assert "is not running, can't shutdown" in caplog.text
