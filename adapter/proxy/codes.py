"""Errors as RocketMQ 5.x status codes: every failure of an RPC is answered with a ``Code``.

Reproduces how RocketMQ's proxy answers (``ProxyExceptionCode`` mapped to
``definition.proto``'s ``Code``): the gRPC call itself succeeds and the response's ``status``
carries the code and a message; each client turns the code into its own exception (the Java
client's ``BadRequestException``, ``UnauthorizedException``, ``TooManyRequestsException``, ...;
the Python client's ``MessagingResultChecker``). A :class:`ProxyError` raised anywhere below an
RPC becomes that answer; any other exception becomes ``INTERNAL_SERVER_ERROR`` with its text,
so a bad request never ends the process.

Known gaps: none.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaException

from adapter.exceptions import (
    AdapterError,
    InvalidMessageError,
    InvalidNameError,
    MessageTooLargeError,
)
from adapter.kafka.metadata import MissingTopic
from adapter.proxy.protocol import Code, definition
from adapter.v5.exception import translate

__all__ = ["Code", "ProxyError", "code_name", "of_exception", "status"]


class ProxyError(Exception):
    """An RPC's failure, answered with ``code`` and ``message``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{code_name(self.code)}: {self.message}"


def code_name(code: int) -> str:
    try:
        return str(Code.Name(code))
    except ValueError:
        return str(code)


def status(code: int = Code.OK, message: str = "OK") -> Any:
    """A ``Status`` message."""
    return definition.Status(code=code, message=message)


def _code_of_failure(exc: BaseException, what: str) -> int:
    """The code of a failure of the cores, or of anything it was raised from, as
    ``adapter.v5`` tells it to its applications (a timeout is ``PROXY_TIMEOUT``, as RocketMQ's
    proxy answers a broker that did not reply in time; a refused authorisation ``FORBIDDEN``; a
    full queue ``TOO_MANY_REQUESTS``); ``INTERNAL_SERVER_ERROR`` for the rest."""
    code = translate(exc, what).code
    return Code.INTERNAL_SERVER_ERROR if code in (None, Code.INTERNAL_ERROR) else int(code)


def of_exception(exc: BaseException, what: str) -> ProxyError:
    """The code an exception of the adapter's cores (or Kafka's) is answered with."""
    if isinstance(exc, ProxyError):
        return exc
    text = f"{what}: {exc}"
    if isinstance(exc, MissingTopic):
        return ProxyError(Code.TOPIC_NOT_FOUND, text)
    if isinstance(exc, MessageTooLargeError):
        return ProxyError(Code.MESSAGE_BODY_TOO_LARGE, text)
    if isinstance(exc, InvalidNameError):
        return ProxyError(Code.ILLEGAL_TOPIC, text)
    if isinstance(exc, InvalidMessageError):
        return ProxyError(Code.BAD_REQUEST, text)
    code = _code_of_failure(exc, what)
    if isinstance(exc, (AdapterError, KafkaException)) or code != Code.INTERNAL_SERVER_ERROR:
        return ProxyError(code, text)
    return ProxyError(code, f"{what}: {type(exc).__name__}: {exc}")
