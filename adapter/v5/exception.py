"""The exceptions of the 5.x client (``rocketmq.v5.exception``), and how Kafka failures map on.

Reproduces the classes of ``rocketmq.v5.exception`` in rocketmq-python-client 5.1: one root,
:class:`ClientException` (a message and an optional ``code``, shown as ``"code, message"``),
with a subclass per status family the proxy answers. Codes are the values of the 5.x
protocol's ``Code`` enum (``TOPIC_NOT_FOUND`` = 40402, ...), so code comparing them keeps
working. ``ClientException`` also derives from the 2.0 root
:class:`~adapter.exceptions.RocketMQException`, so one ``except`` catches both clients' errors.

:func:`translate` turns a failure of the shared send core into the class the 5.x client would
raise for the same cause: a missing topic is ``NotFoundException``, a refused login
``UnauthorizedException``, a missing ACL ``ForbiddenException``, a record Kafka finds too large
``PayloadTooLargeException``, no acknowledgement in time ``ProxyTimeoutException`` (Kafka plays
the proxy), anything else ``InternalErrorException``. The original error stays the
``__cause__``.

Known gaps: the 5.x client raises some failures (gRPC deadlines) as gRPC errors; here every
failure is a ``ClientException``. ``PaymentRequiredException`` and the lite-topic quota
exceptions exist for imports only; nothing raises them.
"""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from adapter.exceptions import AdapterError, DeliveryError, LocalQueueFull, RocketMQException
from adapter.kafka.metadata import MissingTopic

__all__ = [
    "ClientException",
    "BadRequestException",
    "UnauthorizedException",
    "PaymentRequiredException",
    "ForbiddenException",
    "NotFoundException",
    "PayloadTooLargeException",
    "PayloadEmptyException",
    "TooManyRequestsException",
    "LiteSubscriptionQuotaExceededException",
    "LiteTopicQuotaExceededException",
    "RequestHeaderFieldsTooLargeException",
    "InternalErrorException",
    "ProxyTimeoutException",
    "UnsupportedException",
    "IllegalArgumentException",
    "IllegalStateException",
    "translate",
]

# The 5.x protocol's status codes (apache/rocketmq-apis ``Code``) that the adapter answers.
BAD_REQUEST = 40000
UNAUTHORIZED = 40100
FORBIDDEN = 40300
NOT_FOUND = 40400
TOPIC_NOT_FOUND = 40402
PAYLOAD_TOO_LARGE = 41300
MESSAGE_BODY_TOO_LARGE = 41301
TOO_MANY_REQUESTS = 42900
INTERNAL_ERROR = 50000
PROXY_TIMEOUT = 50400
UNSUPPORTED = 50500


class ClientException(RocketMQException):
    """Root of the 5.x client's errors; ``code`` is the protocol's status code, if any."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self._code = code

    @property
    def code(self) -> int | None:
        return self._code

    def __str__(self) -> str:
        text = super().__str__()
        return f"{self._code}, {text}" if self._code else text


class BadRequestException(ClientException):
    """The request was malformed (an illegal topic, tag, key or property)."""


class UnauthorizedException(ClientException):
    """Kafka refused the credentials (SASL authentication failed)."""


class PaymentRequiredException(ClientException):
    """Kept for import compatibility; the adapter never raises it."""


class ForbiddenException(ClientException):
    """The credentials lack a permission (a Kafka ACL) the request needs."""


class NotFoundException(ClientException):
    """The topic (or another resource) does not exist."""


class PayloadTooLargeException(ClientException):
    """Kafka refused a record as too large for the topic or the broker."""


class PayloadEmptyException(ClientException):
    """Kept for import compatibility; an empty body is an ``IllegalArgumentException``."""


class TooManyRequestsException(ClientException):
    """The client's local send queue stayed full: Kafka does not keep up."""


class LiteTopicQuotaExceededException(ClientException):
    """Kept for import compatibility: lite topics cost Kafka nothing, so there is no quota."""


class LiteSubscriptionQuotaExceededException(ClientException):
    """A ``LitePushConsumer`` subscribed as many lite topics as its quota allows."""


class RequestHeaderFieldsTooLargeException(ClientException):
    """Kept for import compatibility; the adapter never raises it."""


class InternalErrorException(ClientException):
    """Kafka failed the request for a reason no other class names; the cause says which."""


class ProxyTimeoutException(ClientException):
    """Kafka did not acknowledge in time (the send timeout: ``request_timeout``)."""


class UnsupportedException(ClientException):
    """The 5.x feature is not available on the adapter (yet); the message names it."""


class IllegalArgumentException(ClientException):
    """A message, setting or call argument is not valid; nothing was sent."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


class IllegalStateException(ClientException):
    """The client is not in a state to do this (not started, shut down, already ended)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


_BY_KAFKA_CODE: dict[int, tuple[type[ClientException], int]] = {
    KafkaError.UNKNOWN_TOPIC_OR_PART: (NotFoundException, TOPIC_NOT_FOUND),
    KafkaError._UNKNOWN_TOPIC: (NotFoundException, TOPIC_NOT_FOUND),
    KafkaError._UNKNOWN_PARTITION: (NotFoundException, TOPIC_NOT_FOUND),
    KafkaError.TOPIC_AUTHORIZATION_FAILED: (ForbiddenException, FORBIDDEN),
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: (ForbiddenException, FORBIDDEN),
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: (ForbiddenException, FORBIDDEN),
    KafkaError.SASL_AUTHENTICATION_FAILED: (UnauthorizedException, UNAUTHORIZED),
    KafkaError._AUTHENTICATION: (UnauthorizedException, UNAUTHORIZED),
    KafkaError.MSG_SIZE_TOO_LARGE: (PayloadTooLargeException, MESSAGE_BODY_TOO_LARGE),
    KafkaError._MSG_TIMED_OUT: (ProxyTimeoutException, PROXY_TIMEOUT),
    KafkaError._TIMED_OUT: (ProxyTimeoutException, PROXY_TIMEOUT),
    KafkaError.REQUEST_TIMED_OUT: (ProxyTimeoutException, PROXY_TIMEOUT),
    KafkaError._QUEUE_FULL: (TooManyRequestsException, TOO_MANY_REQUESTS),
}


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and its chain of causes, outermost first."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _kafka_error(chain: list[BaseException]) -> KafkaError | None:
    for cause in chain:
        if isinstance(cause, AdapterError) and isinstance(cause.kafka_error, KafkaError):
            return cause.kafka_error
        if isinstance(cause, KafkaException) and cause.args:
            first = cause.args[0]
            if isinstance(first, KafkaError):
                return first
    return None


def translate(exc: BaseException, what: str) -> ClientException:
    """The 5.x exception for a failure of ``what`` (e.g. ``"send message to TopicA"``);
    raise it ``from exc``."""
    chain = _causes(exc)
    text = f"{what} failed: {exc}"
    error = _kafka_error(chain)
    if error is not None and error.code() in _BY_KAFKA_CODE:
        kind, code = _BY_KAFKA_CODE[error.code()]
        return kind(text, code)
    for cause in chain:
        if isinstance(cause, MissingTopic):
            return NotFoundException(text, TOPIC_NOT_FOUND)
        if isinstance(cause, LocalQueueFull):
            return TooManyRequestsException(text, TOO_MANY_REQUESTS)
        if isinstance(cause, DeliveryError) and cause.kafka_error is None:
            return ProxyTimeoutException(text, PROXY_TIMEOUT)
    return InternalErrorException(text, INTERNAL_ERROR)
