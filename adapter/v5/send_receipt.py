"""``SendReceipt``: what a 5.x send returns, and the queue it names.

Reproduces ``rocketmq.v5.model.SendReceipt(message_id, transaction_id, message_queue, offset,
recall_handle=None)`` of rocketmq-python-client 5.1 with its read-only properties. A queue is
a Kafka partition: ``message_queue.topic`` and ``message_queue.queue_id`` say where the record
is, ``offset`` is its Kafka offset.

Known gaps: ``transaction_id`` of a transactional send equals ``message_id`` (the message's
``UNIQ_KEY`` is its transaction id, as in RocketMQ 4); the proxy of 5.x makes a separate one.
The queue of a transactional send is the half message's (``RMQ_SYS_TRANS_HALF_TOPIC``,
partition p): the real topic's queue is chosen when the commit is applied; likewise a timer
message's queue and offset are those of its first hop in ``SCHEDULE_TOPIC_XXXX``. Only a timer
message has a ``recall_handle``. ``MessageQueue`` has no broker endpoints or permissions.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MessageQueue", "SendReceipt"]

BROKER_NAME = "kafka"


@dataclass(frozen=True, slots=True)
class MessageQueue:
    """A queue: one partition of a topic."""

    topic: str
    queue_id: int

    @property
    def broker_name(self) -> str:
        return BROKER_NAME

    def __str__(self) -> str:
        return f"{BROKER_NAME}.{self.topic}.{self.queue_id}"


class SendReceipt:
    """A message Kafka acknowledged: its id, where it is, and its transaction id if any."""

    __slots__ = ("_message_id", "_transaction_id", "_message_queue", "_offset", "_recall_handle")

    def __init__(
        self,
        message_id: str,
        transaction_id: str | None,
        message_queue: MessageQueue,
        offset: int,
        recall_handle: str | None = None,
    ) -> None:
        self._message_id = message_id
        self._transaction_id = transaction_id
        self._message_queue = message_queue
        self._offset = offset
        self._recall_handle = recall_handle

    @property
    def message_id(self) -> str:
        return self._message_id

    @property
    def transaction_id(self) -> str | None:
        return self._transaction_id

    @property
    def message_queue(self) -> MessageQueue:
        return self._message_queue

    @property
    def offset(self) -> int:
        return self._offset

    @property
    def recall_handle(self) -> str | None:
        return self._recall_handle

    def __str__(self) -> str:
        return f"message_id:{self._message_id}"

    def __repr__(self) -> str:
        return (
            f"<SendReceipt message_id={self._message_id!r} queue={self._message_queue} "
            f"offset={self._offset}>"
        )
