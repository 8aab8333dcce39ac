"""``Transaction``, ``TransactionChecker`` and ``TransactionResolution``: 5.x transactions.

Reproduces the 5.x transaction model of rocketmq-python-client 5.1: ``begin_transaction()``
gives a ``Transaction``; ``producer.send(message, transaction)`` sends its one half message;
``commit()`` or ``rollback()`` decides it; a half message left undecided is checked back
through the producer's ``TransactionChecker.check(message) -> TransactionResolution``.
``TransactionResolution`` has the protocol's members and values
(``TRANSACTION_RESOLUTION_UNSPECIFIED`` 0, ``COMMIT`` 1, ``ROLLBACK`` 2) and, like the
protobuf enum, ``Name(value)`` and ``Value(name)``.

Underneath it is the 2.0 protocol, unchanged: the half message goes to
``RMQ_SYS_TRANS_HALF_TOPIC`` through ``TransactionMQProducer.send_half``, the decision to
``RMQ_SYS_TRANS_END_TOPIC`` (or the fast path) through ``end_half``, and the coordinator
applies it and sends the check-backs, which :class:`CheckAnswers` turns into
``checker.check(message)`` calls. A check that returns anything but ``COMMIT`` or ``ROLLBACK``
(``TRANSACTION_RESOLUTION_UNSPECIFIED``, ``None``), or raises, leaves the message to the next
check, as an unknown answer does in RocketMQ.

What ``commit()`` and ``rollback()`` returning means: inside the fast path's window (1 s from
the half message's birth) the decision was handed to this process's group committer, which
commits it with the message in its next Kafka transaction, within a few milliseconds (or, if
that group cannot commit, hands it to the coordinator as a plain END record); later, Kafka
acknowledged its END record and the coordinator applies it. Either way the message is visible
to read_committed consumers moments after, and if the process dies before, the check-back
(``TransactionChecker``) decides, as in RocketMQ, whose proxy sends END_TRANSACTION oneway.
A call that fails (a timeout: the decision may have reached Kafka) may be repeated, but the
opposite decision is refused with ``IllegalStateException``, so that two contradicting
decisions are never sent; the coordinator keeps the first anyway.

Known gaps: ``commit()`` and ``rollback()`` return ``None`` (5.x returns the proxy's protobuf
response). Ending a transaction twice raises ``IllegalStateException`` (5.x sends the second
request and the broker answers).
"""

from __future__ import annotations

import abc
import logging
import threading
from enum import IntEnum
from typing import Protocol

from adapter.message import ReceivedMessage
from adapter.transaction.envelope import TransactionStatus
from adapter.v5.exception import IllegalArgumentException, IllegalStateException
from adapter.v5.message import Message
from adapter.v5.send_receipt import SendReceipt

__all__ = ["CheckAnswers", "Transaction", "TransactionChecker", "TransactionResolution"]

log = logging.getLogger(__name__)


class TransactionResolution(IntEnum):
    """The 5.x protocol's ``TransactionResolution``."""

    TRANSACTION_RESOLUTION_UNSPECIFIED = 0
    COMMIT = 1
    ROLLBACK = 2

    @classmethod
    def Name(cls, number: int) -> str:  # the protobuf enum's spelling
        return cls(number).name

    @classmethod
    def Value(cls, name: str) -> int:  # the protobuf enum's spelling
        return int(cls[name])


def status_of(resolution: object) -> TransactionStatus:
    """A checker's answer in the 2.0 protocol's terms: COMMIT, ROLLBACK, else UNKNOWN."""
    if resolution == TransactionResolution.COMMIT and not isinstance(resolution, bool):
        return TransactionStatus.COMMIT
    if resolution == TransactionResolution.ROLLBACK and not isinstance(resolution, bool):
        return TransactionStatus.ROLLBACK
    return TransactionStatus.UNKNOWN


class TransactionChecker(metaclass=abc.ABCMeta):
    """Answers the check-back of a half message that was neither committed nor rolled back."""

    @abc.abstractmethod
    def check(self, message: Message) -> TransactionResolution:
        """``COMMIT`` or ``ROLLBACK`` for ``message``; anything else asks again later."""


class CheckAnswers:
    """The 2.0 ``checker_callback`` that asks a 5.x ``TransactionChecker``."""

    def __init__(self, checker: TransactionChecker) -> None:
        self._checker = checker

    def __call__(self, received: ReceivedMessage) -> TransactionStatus:
        message = Message.from_received(received)
        resolution = self._checker.check(message)
        status = status_of(resolution)
        if status is TransactionStatus.UNKNOWN:
            log.info(
                "TransactionChecker answered %r for %s; it will be checked again",
                resolution,
                message.message_id,
            )
        return status


class Ends(Protocol):
    """What a transaction needs of its producer: ending the half message it sent."""

    def end_transaction(self, transaction_id: str, resolution: TransactionResolution) -> None: ...


class Transaction:
    """One transactional message, from its half message to its commit or rollback."""

    def __init__(self, producer: Ends) -> None:
        self._producer = producer
        self._lock = threading.Lock()
        self._message: Message | None = None
        self._receipt: SendReceipt | None = None
        self._ended: TransactionResolution | None = None
        self._tried: TransactionResolution | None = None
        """A decision whose call failed: it may have reached Kafka (a timeout)."""

    def add_half_message(self, message: Message) -> None:
        """Make ``message`` the transaction's one message (``send`` does this)."""
        with self._lock:
            if message is None:
                raise IllegalArgumentException("add half message error, message is none.")
            if self._message is not None:
                raise IllegalArgumentException(
                    f"message already existed in transaction, topic:{message.topic}"
                )
            self._message = message

    def add_send_receipt(self, send_receipt: SendReceipt) -> None:
        """Record the receipt of the transaction's half message (``send`` does this)."""
        with self._lock:
            if self._message is None:
                raise IllegalArgumentException("add send receipt error, no message in transaction.")
            if send_receipt is None:
                raise IllegalArgumentException("add send receipt error, send receipt in none.")
            if self._message.message_id != send_receipt.message_id:
                raise IllegalArgumentException("can't add another send receipt to a half message.")
            self._receipt = send_receipt

    def commit(self) -> None:
        """Make the message visible to consumers, once."""
        self._end(TransactionResolution.COMMIT)

    def rollback(self) -> None:
        """Drop the message; consumers never see it."""
        self._end(TransactionResolution.ROLLBACK)

    @property
    def message_id(self) -> str | None:
        return self._message.message_id if self._message is not None else None

    def _end(self, resolution: TransactionResolution) -> None:
        with self._lock:
            if self._message is None:
                raise IllegalArgumentException("no message in transaction.")
            if self._receipt is None:
                raise IllegalArgumentException(
                    "no transaction_id in transaction, must send half message at first."
                )
            if self._ended is not None:
                raise IllegalStateException(
                    f"transaction {self._receipt.transaction_id} was already ended "
                    f"({self._ended.name}); a transaction ends once"
                )
            tried = self._tried
            if tried is not None and tried is not resolution:
                raise IllegalStateException(
                    f"transaction {self._receipt.transaction_id} was asked to "
                    f"{tried.name.lower()} and that call failed, so its outcome is unknown (it "
                    f"may have reached Kafka); it cannot be {_past(resolution)} now: "
                    f"{tried.name.lower()} again, or let the check-back (TransactionChecker) "
                    "decide"
                )
            self._tried = resolution
            self._producer.end_transaction(self._receipt.message_id, resolution)
            self._ended = resolution


def _past(resolution: TransactionResolution) -> str:
    return "committed" if resolution is TransactionResolution.COMMIT else "rolled back"
