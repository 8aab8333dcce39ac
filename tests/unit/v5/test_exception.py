"""The 5.x exceptions, and which one a failure of the shared send core becomes."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from adapter.exceptions import (
    DeliveryError,
    LocalQueueFull,
    ProducerSendSyncFailed,
    RocketMQException,
)
from adapter.kafka.metadata import MissingTopic
from adapter.v5 import exception as ex

pytestmark = pytest.mark.timeout(30)


def failed_send(cause: BaseException) -> ProducerSendSyncFailed:
    """What the send core raises: its error class, from the cause."""
    try:
        raise ProducerSendSyncFailed(str(cause)) from cause
    except ProducerSendSyncFailed as exc:
        return exc


def test_a_client_exception_shows_its_code_first_and_is_a_rocketmq_exception() -> None:
    error = ex.NotFoundException("topic Orders does not exist", 40402)
    assert str(error) == "40402, topic Orders does not exist"
    assert error.code == 40402
    assert str(ex.IllegalArgumentException("bad")) == "bad"
    assert isinstance(error, RocketMQException)


def test_every_name_of_the_5x_exception_module_exists() -> None:
    for name in ex.__all__:
        assert hasattr(ex, name), name
    assert all(issubclass(getattr(ex, n), ex.ClientException) for n in ex.__all__[:-1])


@pytest.mark.parametrize(
    ("code", "kind", "status"),
    [
        (KafkaError.UNKNOWN_TOPIC_OR_PART, ex.NotFoundException, 40402),
        (KafkaError.TOPIC_AUTHORIZATION_FAILED, ex.ForbiddenException, 40300),
        (KafkaError.SASL_AUTHENTICATION_FAILED, ex.UnauthorizedException, 40100),
        (KafkaError.MSG_SIZE_TOO_LARGE, ex.PayloadTooLargeException, 41301),
        (KafkaError._MSG_TIMED_OUT, ex.ProxyTimeoutException, 50400),
        (KafkaError.NOT_ENOUGH_REPLICAS, ex.InternalErrorException, 50000),
    ],
)
def test_a_kafka_error_becomes_the_5x_exception_for_the_same_cause(
    code: int, kind: type[ex.ClientException], status: int
) -> None:
    refused = DeliveryError("Kafka refused it", kafka_error=KafkaError(code))
    error = ex.translate(failed_send(refused), "send message X to Orders")
    assert type(error) is kind
    assert error.code == status
    assert "send message X to Orders failed" in str(error)


def test_a_kafka_exception_is_translated_the_same_way() -> None:
    error = ex.translate(
        failed_send(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))), "send"
    )
    assert isinstance(error, ex.NotFoundException)


def test_a_missing_topic_is_not_found_and_no_acknowledgement_a_timeout() -> None:
    missing = ex.translate(failed_send(MissingTopic("topic 'Orders' does not exist")), "send")
    assert isinstance(missing, ex.NotFoundException)
    assert "'Orders' does not exist" in str(missing)
    late = ex.translate(failed_send(DeliveryError("no acknowledgement within 3 s")), "send")
    assert isinstance(late, ex.ProxyTimeoutException)


def test_a_local_queue_that_stays_full_is_too_many_requests() -> None:
    full = LocalQueueFull("the local send queue stayed full for 3 s")
    error = ex.translate(failed_send(full), "send")
    assert isinstance(error, ex.TooManyRequestsException)
