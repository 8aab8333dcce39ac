"""The drop-in facade: ``adapter.client`` replaces ``rocketmq.client`` in an import.

Reproduces the public names of ``rocketmq.client`` in rocketmq-client-python 2.0, with the
same enum values and return types. ``set_name_server_address`` takes Kafka bootstrap servers.

Extensions, which the original lacks: ``Producer.send_batch`` and ``Producer.send_async``
(:mod:`adapter.producer.producer`); everything the original has keeps its signature.

Known gaps: ``PullConsumer`` (not in 2.0's ``__all__``) is not provided.
``TransactionMQProducer`` refuses delayed messages, where the original sends them and the
broker drops them (see :mod:`adapter.transaction.producer`).
"""

from __future__ import annotations

from adapter.consumer.config import MessageModel
from adapter.consumer.push_consumer import ConsumeStatus, PushConsumer
from adapter.message import Message, ReceivedMessage
from adapter.producer.producer import Producer, SendResult, SendStatus
from adapter.properties import MessageProperty
from adapter.transaction.producer import TransactionMQProducer, TransactionStatus

__all__ = [
    "SendStatus",
    "Message",
    "ReceivedMessage",
    "Producer",
    "PushConsumer",
    "TransactionMQProducer",
    "TransactionStatus",
    "ConsumeStatus",
    "SendResult",
    "MessageModel",
    "MessageProperty",
]
