"""The producer's side of the direct commit: one append makes a committed message visible.

For a real topic with a fence (:mod:`adapter.transaction.fences`), a transactional producer
marks each half message as direct (``DIRECT_FENCE``: how long after its born time a direct
append of it may land and be readable) and chooses its queue at once (the half message's
``queue_id``). Its own COMMIT is then:

1. the real message appended to that queue by the producer's idempotent producer, stamped
   (CreateTime) with the born time, so that the topic's leader refuses it once the fence has
   passed;
2. once Kafka acknowledged it (acks=all: readable), its END record, marked delivered.

A COMMIT taken later than half the topic's before.max after the born time (a slow local
transaction) is not appended: a stamp that old could be refused, and with it the records
batched beside it; its END goes out plain, and the coordinator applies it with a search of the
queue (:mod:`adapter.transaction.direct_search`). A refused or unanswered append sends nothing:
the decision is left UNKNOWN, and the check-back settles it the same way. ROLLBACK is a plain
END, as before.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections.abc import Callable

from confluent_kafka import KafkaError
from confluent_kafka import Message as KafkaRecord

from adapter import naming
from adapter import properties as prop
from adapter.clock import Clock
from adapter.exceptions import ProducerException
from adapter.producer.sender import Outgoing, Sender
from adapter.transaction.envelope import DELIVERED_HEADER, committed_delivery
from adapter.transaction.fences import TopicFences
from adapter.wire import codec
from adapter.wire.records import EndTransaction, HalfMessage, TransactionDecision

__all__ = ["DirectCommits", "is_direct"]

log = logging.getLogger(__name__)

END = naming.kafka_topic(naming.TRANS_END_TOPIC)


def is_direct(half: HalfMessage) -> bool:
    """Whether ``half`` was sent to be committed directly."""
    return prop.DIRECT_FENCE in half.properties


class DirectCommits:
    """Direct commits through one producer's :class:`Sender`."""

    def __init__(
        self,
        sender: Sender,
        fences: TopicFences,
        clock: Clock,
        on_lost: Callable[[EndTransaction, str], None],
    ) -> None:
        self._sender = sender
        self._fences = fences
        self._clock = clock
        self._on_lost = on_lost

    def knows(self, kafka_topic: str) -> bool:
        """Whether :meth:`prepare` of a message to ``kafka_topic`` asks Kafka nothing."""
        return self._fences.knows(kafka_topic)

    def prepare(self, half: HalfMessage) -> HalfMessage:
        """``half`` marked direct, with its queue chosen, when its topic has a fence; else
        ``half`` as it is."""
        topic = naming.kafka_topic(half.topic)
        fence = self._fences.of(topic)
        if fence is None:
            return half
        queue = random.randrange(self._sender.topics.require(topic))  # noqa: S311
        properties = {**half.properties, prop.DIRECT_FENCE: str(fence.window_ms)}
        return dataclasses.replace(half, queue_id=queue, properties=properties)

    def commit(self, half: HalfMessage, end: EndTransaction) -> bool:
        """Append ``half``'s message and then, acknowledged, send its END, without waiting;
        False when it is too late for an append (send the END plain instead)."""
        record = self._append(half, end)
        if record is None:
            return False

        def appended(err: KafkaError | None, _msg: KafkaRecord) -> None:
            if err is not None:
                self._on_lost(end, f"its direct append failed: {err.str()}")
                return
            try:
                self._sender.produce_oneway(self._end(end), ProducerException, self._end_sent(end))
            except ProducerException as exc:
                self._on_lost(end, str(exc))

        try:
            self._sender.produce_oneway(record, ProducerException, on_delivery=appended)
        except ProducerException as exc:
            self._on_lost(end, str(exc))
        return True

    def _append(self, half: HalfMessage, end: EndTransaction) -> Outgoing | None:
        if end.decision is not TransactionDecision.COMMIT or not is_direct(half):
            return None
        topic = naming.kafka_topic(half.topic)
        fence = self._fences.of(topic)
        if fence is None or self._clock.now_ms() - half.born_timestamp > fence.before_max_ms // 2:
            return None
        delivery = committed_delivery(half, check_times=0)
        return Outgoing(
            topic, delivery.value, delivery.headers, half.queue_id, None, half.born_timestamp
        )

    @staticmethod
    def _end(end: EndTransaction) -> Outgoing:
        headers = [(DELIVERED_HEADER, b"1")]
        return Outgoing(END, codec.encode(end), headers, end.half_partition, None)

    def _end_sent(self, end: EndTransaction) -> Callable[[KafkaError | None, KafkaRecord], None]:
        def sent(err: KafkaError | None, _msg: KafkaRecord) -> None:
            if err is not None:  # the message is out; a check finds it there
                self._on_lost(end, f"its END after the direct append failed: {err.str()}")

        return sent
