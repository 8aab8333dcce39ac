"""The 2.0 transactional producers behind one 5.x ``Producer``: one per topic.

Reproduces how RocketMQ 5's proxy groups transactional producers: a 5.x producer has no
group; the proxy registers it under each topic it publishes to, *the topic's name being the
producer group*, and sends a check-back to any live producer of that topic. Here each topic
gets a 2.0 :class:`~adapter.transaction.producer.TransactionMQProducer` whose group is the
topic: its half messages carry ``PGROUP`` = topic, and it joins the topic's check group
(``%CHECK%<topic>``), so every 5.x producer of the topic, in any process, shares the checks,
and the coordinator, HALF, END and OP topics are the ones 2.0 transactions use.

Topics named in ``Producer(..., topics=...)`` start their transactional producer at
``startup()`` (check-backs are answered from then on); another topic's starts at its first
transactional send.

Known gaps: each transactional topic costs a Kafka producer, a check consumer and the fast
path's transactional producers. A 2.0 ``TransactionMQProducer`` whose group is named like the
topic shares the check-backs too (as a remoting producer of that group would in RocketMQ 5).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from adapter.config import KafkaSettings
from adapter.exceptions import ProducerStartFailed
from adapter.transaction.producer import TransactionMQProducer
from adapter.v5.exception import IllegalStateException, translate
from adapter.v5.transaction import CheckAnswers, TransactionChecker

__all__ = ["TransactionalSenders", "shut_down_all"]

log = logging.getLogger(__name__)


class TransactionalSenders:
    """The started ``TransactionMQProducer`` of each topic, made on first use."""

    def __init__(
        self,
        kafka: KafkaSettings,
        checker: TransactionChecker,
        *,
        instance_name: str,
        timeout_ms: int,
        max_message_size: int,
    ) -> None:
        self._kafka = kafka
        self._answers = CheckAnswers(checker)
        self._instance_name = instance_name
        self._timeout_ms = timeout_ms
        self._max_message_size = max_message_size
        self._by_topic: dict[str, TransactionMQProducer] = {}
        self._lock = threading.Lock()
        self._closed = False

    def start(self, topics: Iterable[str]) -> None:
        """Start the producers of ``topics`` (they answer check-backs from now on)."""
        for topic in topics:
            self.for_topic(topic)

    def for_topic(self, topic: str) -> TransactionMQProducer:
        """The started producer of ``topic``; the 5.x exception for why it cannot start."""
        with self._lock:
            if self._closed:
                raise IllegalStateException("producer is not running now.")
            producer = self._by_topic.get(topic)
            if producer is None:
                producer = TransactionMQProducer(
                    topic,
                    self._answers,
                    timeout=self._timeout_ms,
                    max_message_size=self._max_message_size,
                    kafka=self._kafka,
                )
                producer.set_instance_name(self._instance_name)
                try:
                    producer.start()
                except ProducerStartFailed as exc:
                    raise translate(exc, f"start transactional sends to {topic}") from exc
                self._by_topic[topic] = producer
            return producer

    def close(self) -> None:
        """Shut every producer down (each waits for a running check and its END records)."""
        with self._lock:
            self._closed = True
            producers, self._by_topic = list(self._by_topic.values()), {}
        shut_down_all(producers)


def shut_down_all(producers: Iterable[TransactionMQProducer]) -> None:
    """Shut each producer down (a running check ends, open groups commit); one that fails is
    logged, and the others still stop."""
    for producer in producers:
        try:
            producer.shutdown()
        except Exception:
            log.exception("a transactional producer did not shut down cleanly")
