"""``PushConsumer``: clustering, broadcasting and orderly consumption on Kafka.

Reproduces ``rocketmq.client.PushConsumer`` of rocketmq-client-python 2.0: its constructor,
setters, ``subscribe`` with a tag expression, ``start``/``shutdown``. The work is done by the
poll loop (:mod:`adapter.consumer.loop`), the callback dispatcher
(:mod:`adapter.consumer.dispatch`) and the send-back (:mod:`adapter.consumer.send_back`).
``start()`` fails with ``PushConsumerStartFailed``, naming the Kafka address, when the group
cannot start (no subscription, a bad name, Kafka unreachable), as the original raises it.

Known gaps: see the modules above. ``set_message_batch_max_size`` is accepted and ignored:
callbacks receive one message, as in 2.0.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaException

from adapter import naming
from adapter.client_settings import ClientSettings
from adapter.config import KafkaSettings, delay_levels_from_env
from adapter.consumer.config import ConsumerConfig, MessageModel
from adapter.consumer.dispatch import (
    ConsumerStats,
    ConsumeStatus,
    MessageCallback,
    Subscription,
)
from adapter.consumer.loop import ConsumeLoop
from adapter.exceptions import AdapterError, PushConsumerStartFailed
from adapter.tags import TagFilter

__all__ = ["ConsumeStatus", "PushConsumer"]


class PushConsumer(ClientSettings):
    """Drop-in for ``rocketmq.client.PushConsumer``."""

    def __init__(
        self,
        group_id: str,
        orderly: bool = False,
        message_model: MessageModel = MessageModel.CLUSTERING,
    ) -> None:
        self._group = group_id
        self._orderly = orderly
        self._model = MessageModel(message_model)
        self._thread_count: int | None = None
        self._batch_max_size = 1
        self._max_reconsume_times: int | None = None
        self._subscriptions: dict[str, Subscription] = {}
        self._runner: ConsumeLoop | None = None
        self.stats = ConsumerStats()

    # -- settings ---------------------------------------------------------------------------

    def set_message_model(self, model: MessageModel) -> None:
        self._model = MessageModel(model)

    def set_thread_count(self, thread_count: int) -> None:
        self._thread_count = thread_count

    def set_message_batch_max_size(self, max_size: int) -> None:
        """Accepted for compatibility; callbacks always receive one message, as in 2.0."""
        self._batch_max_size = max_size

    def set_max_reconsume_times(self, times: int) -> None:
        """Failed deliveries before a message goes to ``%DLQ%<group>`` (default 16)."""
        self._max_reconsume_times = times

    def subscribe(self, topic: str, callback: MessageCallback, expression: str = "*") -> None:
        """Consume ``topic`` with ``callback``, keeping messages whose tag matches ``expression``.

        Raises :class:`~adapter.exceptions.InvalidNameError` for a bad topic name and
        :class:`~adapter.exceptions.TagExpressionError` for a malformed expression.
        """
        kafka_topic = naming.kafka_topic(topic)
        self._subscriptions[kafka_topic] = Subscription(
            topic, kafka_topic, callback, TagFilter.parse(expression)
        )

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        if self._runner is not None:
            return
        if not self._subscriptions:
            raise PushConsumerStartFailed(
                f"consumer group {self._group!r} has no subscription; call subscribe() first"
            )
        address = "(no address)"
        try:
            naming.validate_group(self._group)
            kafka = KafkaSettings.from_env(self._bootstrap)
            address = kafka.bootstrap_servers
            kwargs: dict[str, Any] = {}
            if self._thread_count is not None:
                kwargs["thread_count"] = self._thread_count
            if self._max_reconsume_times is not None:
                kwargs["max_reconsume_times"] = self._max_reconsume_times
            config = ConsumerConfig(
                kafka,
                self._group,
                message_model=self._model,
                orderly=self._orderly,
                instance_name=self._instance_name,
                batch_max_size=self._batch_max_size,
                delay_levels=delay_levels_from_env(),
                **kwargs,
            )
            runner = ConsumeLoop(config, dict(self._subscriptions), self.stats)
            runner.start()
        except (AdapterError, KafkaException) as exc:
            raise PushConsumerStartFailed(
                f"consumer group {self._group!r} could not start (Kafka at {address}): {exc}"
            ) from exc
        self._runner = runner

    def assigned_queues(self) -> list[tuple[str, int]]:
        """(topic, queue id) pairs this instance consumes now (adapter extension)."""
        runner = self._runner
        return runner.assigned() if runner is not None else []

    def shutdown(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.stop()
