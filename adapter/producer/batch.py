"""RocketMQ's rules for a batch send, pure: what is refused before anything is sent.

Reproduces the checks of the Java client's ``DefaultMQProducer.send(Collection<Message>)``
(``MessageBatch.generateFromList`` and ``Validators.checkMessage``), with their messages:

- the messages are all of one topic ("The topic of the messages in one batch should be the
  same");
- none is delayed ("TimeDelayLevel is not supported for batching"), nor carries a delivery
  time (``TIMER_*``, ``__STARTDELIVERTIME``), which is a delay too;
- none is for a retry topic ("Retry Group is not supported for batching");
- the batch, sized as RocketMQ encodes it (:func:`encoded_size`), is at most the producer's
  max message size, as RocketMQ checks the encoded batch's body against ``maxMessageSize``.

Beyond RocketMQ: an empty batch and a transactional (``TRAN_MSG``) message are refused with a
clear error (the 2.0 Python client has no batch send; rocketmq-client-python#108).
"""

from __future__ import annotations

from collections.abc import Sequence

from adapter import naming
from adapter import properties as prop
from adapter.exceptions import InvalidMessageError, MessageTooLargeError
from adapter.message import Message

FIXED_FIELDS = 4 + 4 + 4 + 4 + 4 + 2
"""What ``MessageDecoder.encodeMessage`` writes besides body and properties: total size,
magic code, body CRC, flag, body length (4 bytes each) and properties length (2)."""


def encoded_size(msg: Message, msg_id: str) -> int:
    """``msg``'s size in a RocketMQ batch: its fixed fields, body, and properties written as
    ``name\\x01value\\x02``."""
    properties = sum(len(name.encode()) + len(value) + 2 for name, value in msg.headers(msg_id))
    return FIXED_FIELDS + len(msg.body) + properties


def check_batch(messages: Sequence[Message], max_size: int) -> str:
    """The RocketMQ topic of a batch that keeps the rules; ``InvalidMessageError`` (or
    ``MessageTooLargeError``) naming the rule it breaks. Each message gets its ``UNIQ_KEY``
    here if it has none (and keeps it), so a batch sent again carries the same ids."""
    if not messages:
        raise InvalidMessageError("a batch needs at least one message, got no messages")
    topic = messages[0].topic
    size = 0
    for msg in messages:
        if msg.topic.startswith(naming.RETRY_PREFIX):
            raise InvalidMessageError("Retry Group is not supported for batching", topic=topic)
        if msg.topic != topic:
            raise InvalidMessageError(
                "The topic of the messages in one batch should be the same "
                f"({topic!r} and {msg.topic!r})",
                topic=msg.topic,
            )
        if msg.delay_time_level > 0:
            raise InvalidMessageError("TimeDelayLevel is not supported for batching", topic=topic)
        properties = msg.properties
        if timed := [name for name in prop.DELIVERY_TIME if name in properties]:
            raise InvalidMessageError(
                f"a message with a delivery time ({timed[0]}) is not supported for batching",
                topic=topic,
            )
        if prop.TRANSACTION_PREPARED in properties:
            raise InvalidMessageError(
                "transactional messages are not supported for batching", topic=topic
            )
        size += encoded_size(msg, msg.unique_key())
    if size > max_size:
        raise MessageTooLargeError(
            f"the batch size over max value, MAX: {max_size}, got {size}", topic=topic
        )
    return topic
