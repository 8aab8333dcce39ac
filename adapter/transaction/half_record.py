"""A producer's half message and the HALF record that carries it, checked before it is sent.

Reproduces what RocketMQ's ``sendMessageInTransaction`` checks before it writes the half
message, for every producer that writes one (the 2.0 and 5.x drop-ins, the proxy): the
message is sendable, the coordinator's own validation takes it (so it never refuses what is
sent), its real topic exists (or is created as a plain send creates it), and HALF and END exist
with the same partition count. A missing topic is one error naming the command that makes it.

Nothing here waits on Kafka while the topics' partition counts are cached
(:class:`~adapter.kafka.metadata.PartitionCounts`), which lets an event loop build the record.
"""

from __future__ import annotations

import dataclasses

from adapter import naming
from adapter import properties as prop
from adapter.exceptions import AdapterError
from adapter.kafka.metadata import MissingTopic
from adapter.message import Message
from adapter.producer import routing
from adapter.producer.sender import Outgoing, Sender
from adapter.transaction.envelope import half_message
from adapter.transaction.half import half_info
from adapter.wire import codec
from adapter.wire.records import HalfMessage

__all__ = ["END", "HALF", "half_of", "record", "require_topics"]

HALF = naming.kafka_topic(naming.TRANS_HALF_TOPIC)
END = naming.kafka_topic(naming.TRANS_END_TOPIC)


def half_of(
    sender: Sender,
    message: Message,
    group: str,
    transaction_id: str,
    born_ms: int,
    copy_stamp: int | None = None,
) -> HalfMessage:
    """``message`` as the half message of ``group``'s transaction ``transaction_id``, checked
    (``AdapterError`` with the rule it breaks); ``copy_stamp``: see ``COPY_STAMP``."""
    topic = sender.check(message)
    half = half_message(message, group=group, transaction_id=transaction_id, born_ms=born_ms)
    if copy_stamp is not None:
        properties = {**half.properties, prop.COPY_STAMP: str(copy_stamp)}
        half = dataclasses.replace(half, properties=properties)
    half_info(half)  # the coordinator's own validation: it never refuses what we send
    require_topics(sender, topic)
    return half


def record(
    sender: Sender, half: HalfMessage, *, partition: int | None, key: str | None
) -> Outgoing:
    """The HALF record of ``half``: on ``partition`` (None: any), or on the one ``key``
    hashes to, where a copy sent again with the same key lands too."""
    if key is not None:
        partition = routing.queue_for_sharding_key(key, sender.topics.require(HALF))
    headers = [(prop.UNIQ_KEY, half.transaction_id.encode())]
    return Outgoing(HALF, codec.encode(half), headers, partition, None)


def require_topics(sender: Sender, topic: str) -> None:
    """The real Kafka ``topic`` exists, or is created as a plain send creates it (asked for by
    name: a broker with ``auto.create.topics.enable`` creates it; a topic created a moment
    ago may take until the send timeout to appear), and HALF and END exist with the same
    partition count."""
    try:
        sender.topics.require(topic, create=True, wait_s=sender.timeout_s)
        missing = False
    except MissingTopic:
        missing = True
    if missing:  # raised here, not in the handler: no retry machinery in its traceback
        name = naming.decode(topic)
        raise MissingTopic(
            f"topic {name!r} does not exist and this Kafka cluster does not create topics "
            f"on use: create it with `rmq-adapter topics create {name}`",
            topic=name,
        )
    try:
        half, end = sender.topics.require(HALF), sender.topics.require(END)
    except AdapterError as exc:
        raise AdapterError(
            f"{exc}; create the system topics with `rmq-adapter topics init`"
        ) from exc
    if half != end:
        raise AdapterError(
            f"{naming.TRANS_HALF_TOPIC} has {half} partitions and {naming.TRANS_END_TOPIC} "
            f"{end}; they must match (see `rmq-adapter topics init`)"
        )
