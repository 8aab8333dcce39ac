"""``FifoSimpleConsumer``: the 5.x ``SimpleConsumer`` of a FIFO consumer group, on Kafka.

Reproduces what a 5.x broker does for a consumer group whose FIFO attribute is set
(``consumeMessageOrderly``): the group gets the next message of a message group only once the
one before is acked; one not acked within its invisible duration comes back, at the same
position, with ``delivery_attempt`` + 1; past the max attempts (17) it goes to
``%DLQ%<group>`` and its group goes on; a failing message holds back only its own message
group. RocketMQ makes FIFO a group attribute; here it is this class (adapter extension), with
exactly :class:`~adapter.v5.simple_consumer.SimpleConsumer`'s constructor and methods
(``receive``, ``ack``, ``change_invisible_duration``, their ``_async`` variants,
``forward_to_dead_letter_queue``, ``subscribe``, ``shutdown``), so the proxy can pick it per group.

Underneath is a classic Kafka consumer group of the same name, not a share group (a share
group keeps no order): :mod:`adapter.v5.fifo_reader` (the Kafka shell) and
:mod:`adapter.v5.fifo_book` (the pure order book).

Known gaps: ``lock_duration`` and ``max_consumers`` are accepted and unused (no share group);
invisible durations go up to 12 h. Partitions are the unit Kafka spreads over the group's
consumers, so one consumer serves every message group of its partitions. The rest (rebalances,
attempts, commits) is in :mod:`adapter.v5.fifo_reader`.
"""

from __future__ import annotations

import logging

from adapter.config import KafkaSettings
from adapter.v5.fifo_reader import FifoReader
from adapter.v5.share_group import ROCKETMQ_MAX_ATTEMPTS
from adapter.v5.simple_consumer import Engine, SimpleConsumer

__all__ = ["FifoSimpleConsumer"]

log = logging.getLogger(__name__)


class FifoSimpleConsumer(SimpleConsumer):
    """A ``SimpleConsumer`` that keeps each message group's order (a FIFO consumer group)."""

    def _start(self, kafka: KafkaSettings, timeout_s: float) -> Engine:
        """The group's Kafka consumer and poll thread (no share group to configure)."""
        for topic in self._subscriptions:
            self._require_topic(topic, kafka)
        self._max_attempts = self._max_attempts_asked or ROCKETMQ_MAX_ATTEMPTS
        reader = FifoReader(
            kafka=kafka, group=self._group, client_id=self._client_id,
            max_attempts=self._max_attempts, send_back=self._begin(kafka, timeout_s),
            filters=self._filters, clock=self._clock,
        )  # fmt: skip
        log.info(
            "%s started (FIFO; Kafka at %s, max attempts %d)",
            self, kafka.bootstrap_servers, self._max_attempts, extra={"group": self._group},
        )  # fmt: skip
        return reader

    def __str__(self) -> str:
        return f"FIFO_SIMPLE_CONSUMER:{self._group}, client_id:{self._client_id}"
