"""The 5.x drop-in surface: ``adapter.v5`` replaces ``rocketmq`` (rocketmq-python-client 5.1).

Reproduces ``rocketmq``'s producer and consumer public names, with the same constructors,
properties, enum members and return types: ``Producer``, ``Transaction``,
``TransactionChecker``, ``TransactionResolution``, ``SimpleConsumer`` (on a Kafka share
group), ``PushConsumer`` (a ``SimpleConsumer`` with a listener), ``LitePushConsumer`` (lite
topics, records of their parent topic), ``MessageListener`` and ``ConsumeResult``,
``FilterExpression``, ``FilterType``, ``Message``, ``SendReceipt``,
``ClientConfiguration`` and ``Credentials``; the exceptions are in :mod:`adapter.v5.exception`
(``rocketmq.v5.exception``). Endpoints are Kafka bootstrap servers. Underneath are the 2.0
client's send core and transactional producer, so messages and transactions of both clients
share one wire format, one set of system topics and one coordinator. Timer messages
(``delivery_timestamp``, up to 40 days) and ``recall_message`` ride on the schedule forwarder.

A FIFO consumer group (adapter extension, RocketMQ's FIFO group attribute) is
``adapter.v5.fifo_consumer.FifoSimpleConsumer``: the ``SimpleConsumer`` API on a classic Kafka
consumer group, one message at a time per message group: ``fifo_consumer`` (the class),
``fifo_reader`` (its Kafka consumer and poll thread), ``fifo_book`` (the pure order book) and
``fifo_note`` (what a partition's next owner is told in the commit's metadata).

Priority messages (``Message.priority``, RIP-80) go to their band of a topic made for
priorities, a Kafka topic per band (:mod:`adapter.priorities`); both consumers take a
backlog's higher bands first.

Known gaps: each module lists its own differences.
"""

from __future__ import annotations

from adapter.v5.client_configuration import ClientConfiguration, Credentials
from adapter.v5.filter_expression import FilterExpression, FilterType
from adapter.v5.lite_push_consumer import LitePushConsumer
from adapter.v5.message import Message
from adapter.v5.message_listener import ConsumeResult, MessageListener
from adapter.v5.producer import Producer
from adapter.v5.push_consumer import PushConsumer
from adapter.v5.send_receipt import SendReceipt
from adapter.v5.simple_consumer import SimpleConsumer
from adapter.v5.transaction import Transaction, TransactionChecker, TransactionResolution

__all__ = [
    "Producer",
    "SimpleConsumer",
    "PushConsumer",
    "LitePushConsumer",
    "MessageListener",
    "ConsumeResult",
    "FilterExpression",
    "FilterType",
    "TransactionChecker",
    "Transaction",
    "TransactionResolution",
    "Message",
    "SendReceipt",
    "ClientConfiguration",
    "Credentials",
]
