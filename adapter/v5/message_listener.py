"""``MessageListener`` and ``ConsumeResult``: what a 5.x push consumer calls, and its answer.

Reproduces ``rocketmq.v5.consumer.MessageListener`` (an abstract class whose ``consume(message)``
returns a ``ConsumeResult``) and ``ConsumeResult`` (``SUCCESS`` = 0, ``FAILURE`` = 1) of
rocketmq-python-client 5.1. :func:`is_success` reads a listener's answer: only ``SUCCESS``
consumes the message; ``FAILURE``, any other value and
an exception have it delivered again later, as the 5.x client does (it logs an exception and
treats it as a failure).

Known gaps: none of its own (see :mod:`adapter.v5.push_consumer` for redelivery).
"""

from __future__ import annotations

import abc
import logging
from enum import Enum
from typing import Any

__all__ = ["ConsumeResult", "MessageListener", "is_success", "listen"]

log = logging.getLogger(__name__)


class ConsumeResult(Enum):
    """``rocketmq.v5.consumer.ConsumeResult``."""

    SUCCESS = 0
    FAILURE = 1


class MessageListener(metaclass=abc.ABCMeta):
    """Implement ``consume``; a push consumer calls it once per delivery of a message."""

    @abc.abstractmethod
    def consume(self, message: Any) -> ConsumeResult:
        """Consume ``message`` (an :class:`adapter.v5.Message`); ``SUCCESS`` or ``FAILURE``."""


def is_success(result: object) -> bool:
    """Whether a listener's answer consumes its message: ``SUCCESS`` only."""
    if result is ConsumeResult.SUCCESS:
        return True
    if result is not ConsumeResult.FAILURE:
        log.warning("a message listener returned %r, not a ConsumeResult: a failure", result)
    return False


def listen(listener: MessageListener, message: Any, who: object) -> bool:
    """Whether ``listener`` consumed ``message``; an exception is logged (naming ``who``) and
    is a failure, as the 5.x client treats it."""
    try:
        result = listener.consume(message)
    except Exception:
        log.exception("%s: the listener raised on %s; it will be delivered again", who,
                      getattr(message, "message_id", None))  # fmt: skip
        return False
    return is_success(result)
