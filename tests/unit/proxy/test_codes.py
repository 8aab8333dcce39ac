"""Which status code a failure of the cores is answered with: RocketMQ's proxy's, as the
5.x applications of ``adapter.v5`` are told."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from adapter.exceptions import AdapterError, DeliveryError, LocalQueueFull, ProducerException
from adapter.proxy.codes import Code, ProxyError, of_exception

pytestmark = pytest.mark.timeout(10)


@pytest.mark.parametrize(
    ("failure", "code"),
    [
        (DeliveryError("no acknowledgement within 3 s for m to T"), Code.PROXY_TIMEOUT),
        (DeliveryError("x", kafka_error=KafkaError(KafkaError._MSG_TIMED_OUT)), Code.PROXY_TIMEOUT),
        (KafkaException(KafkaError(KafkaError.REQUEST_TIMED_OUT)), Code.PROXY_TIMEOUT),
        (
            DeliveryError("x", kafka_error=KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)),
            Code.FORBIDDEN,
        ),
        (LocalQueueFull("the local send queue stayed full"), Code.TOO_MANY_REQUESTS),
        (AdapterError("the coordinator is away"), Code.INTERNAL_SERVER_ERROR),
        (KafkaException(KafkaError(KafkaError._TRANSPORT)), Code.INTERNAL_SERVER_ERROR),
        (KafkaException("no KafkaError inside"), Code.INTERNAL_SERVER_ERROR),
        (RuntimeError("a bug"), Code.INTERNAL_SERVER_ERROR),
    ],
)
def test_a_failure_is_answered_with_the_code_rocketmqs_proxy_gives(
    failure: BaseException, code: int
) -> None:
    error = of_exception(failure, "send m")

    assert (error.code, error.message.startswith("send m: ")) == (code, True)


def test_a_proxy_error_is_answered_as_it_is() -> None:
    error = ProxyError(Code.BAD_REQUEST, "no")

    assert of_exception(error, "send m") is error


def test_a_timeout_wrapped_by_the_send_core_is_still_a_timeout() -> None:
    """The send core raises its own exception from Kafka's (the proxy's sends do)."""
    try:
        try:
            raise DeliveryError("x", kafka_error=KafkaError(KafkaError._MSG_TIMED_OUT))
        except DeliveryError as exc:
            raise ProducerException("send failed: Local: Message timed out") from exc
    except ProducerException as wrapped:
        error = of_exception(wrapped, "send m")

    assert (error.code, "timed out" in error.message) == (Code.PROXY_TIMEOUT, True)
