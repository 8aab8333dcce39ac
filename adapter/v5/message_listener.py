"""``MessageListener`` and ``ConsumeResult``: what a 5.x push consumer calls, and its answer.

Reproduces ``rocketmq.v5.consumer.MessageListener`` (an abstract class whose ``consume(message)``
returns a ``ConsumeResult``) and ``ConsumeResult`` (``SUCCESS`` = 0, ``FAILURE`` = 1) of
rocketmq-python-client 5.1. :func:`as_status` turns a listener's answer into the 2.0 consumer
core's ``ConsumeStatus``: only ``SUCCESS`` consumes the message; ``FAILURE``, any other value and
an exception have it delivered again later, as the 5.x client does (it logs an exception and
treats it as a failure).

Known gaps: none of its own (see :mod:`adapter.v5.push_consumer` for redelivery).
"""

from __future__ import annotations

import abc
import logging
from enum import Enum
from typing import Any

from adapter.consumer.dispatch import ConsumeStatus

__all__ = ["ConsumeResult", "MessageListener", "as_status"]

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


def as_status(result: object) -> ConsumeStatus:
    """The 2.0 core's status for a listener's answer: ``SUCCESS`` consumes, all else fails."""
    if result is ConsumeResult.SUCCESS:
        return ConsumeStatus.CONSUME_SUCCESS
    if result is not ConsumeResult.FAILURE:
        log.warning("a message listener returned %r, not a ConsumeResult: a failure", result)
    return ConsumeStatus.RECONSUME_LATER
