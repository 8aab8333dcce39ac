"""Consumer send-back: a failed message goes to ``%RETRY%<group>`` later, or to ``%DLQ%<group>``.

Reproduces the broker's ``AbstractSendMessageProcessor.consumerSendMsgBack`` on the client side:
a message whose ``reconsume_times`` is below ``max_reconsume_times`` (16) is parked on
``SCHEDULE_TOPIC_XXXX`` at level 3 + reconsume_times (clamped to the highest level), addressed
to the group's retry topic, with ``RECONSUME_TIME`` + 1, ``RETRY_TOPIC`` (the original topic),
``ORIGIN_MESSAGE_ID`` and ``MAX_RECONSUME_TIMES``; the forwarder delivers it when due.
Otherwise the message goes straight to the group's dead-letter topic. Both topics have one
queue, as RocketMQ creates them (``retryQueueNums`` = 1, ``DLQ_NUMS_PER_GROUP`` = 1).

``send`` returns only once Kafka has acknowledged the copy, so the caller may then commit the
original's offset; when it fails the caller falls back to consuming again locally, as
RocketMQ's client does when its send-back request fails. That local retry counts as a
reconsumption, so it ends in the dead-letter topic after as many deliveries as the retry topic
allows. Any header bytes go back (a value that is not UTF-8 travels in base64, see
:mod:`adapter.property_bytes`); a dead letter carries them as bytes, and ``rmq.dlq_reason``
says why it is there.

Known gaps: the copy's id is the original's ``UNIQ_KEY`` (RocketMQ keeps it too), so a
message's id does not tell its deliveries apart; ``reconsume_times`` does. A dead letter Kafka
keeps refusing (larger than the dead-letter topic takes, say) is consumed again locally every
5 s until Kafka takes it, holding its queue's commits meanwhile: it is never dropped.
"""

from __future__ import annotations

import logging
import threading

from confluent_kafka import KafkaException, Producer

from adapter import naming
from adapter import properties as prop
from adapter.consumer.config import ConsumerConfig
from adapter.exceptions import AdapterError
from adapter.kafka import clients, schemas, writing
from adapter.kafka.topics import ensure_single_queue_topic
from adapter.message import Delivery, ReceivedMessage
from adapter.property_bytes import restored
from adapter.schedule.envelope import delivered, sent_back
from adapter.schedule.signing import signed
from adapter.wire import codec

log = logging.getLogger(__name__)

_SCHEDULE = naming.kafka_topic(naming.SCHEDULE_TOPIC)
_NOT_ON_DEAD_LETTERS = (prop.REAL_TOPIC, prop.REAL_QUEUE_ID)
_REFUSALS_KEPT = 10_000
DLQ_REASON = "rmq.dlq_reason"
"""The header of a dead letter that says why it was moved there (adapter extension)."""


def dead_letter_record(
    message: ReceivedMessage, dlq_topic: str, *, max_reconsume_times: int, reason: str
) -> Delivery:
    """The record of ``message`` for ``%DLQ%<group>``: the retry's record (``RETRY_TOPIC``,
    ``ORIGIN_MESSAGE_ID``, ``RECONSUME_TIME`` + 1, ...) with every header as its bytes, and
    ``rmq.dlq_reason`` saying why it is there."""
    record = sent_back(
        message, to_topic=dlq_topic, level=0, max_reconsume_times=max_reconsume_times
    )
    delivery = delivered(record)
    headers = [
        (name, value)
        for name, value in restored(delivery.headers)
        if name not in _NOT_ON_DEAD_LETTERS and value is not None
    ]
    headers.append((DLQ_REASON, reason.encode("utf-8", errors="backslashreplace")))
    return Delivery(dlq_topic, 0, None, delivery.value, headers)


class SendBack:
    def __init__(self, config: ConsumerConfig) -> None:
        self._config = config
        self._retry_topic = naming.retry_topic(config.group)
        self._dlq_topic = naming.dlq_topic(config.group)
        self._producer: Producer | None = None
        self._dlq_ready = False
        self._lock = threading.Lock()
        self._refused: dict[tuple[str, int, int], str] = {}
        """Why the last retry of a message being consumed again locally failed."""

    @property
    def retry_kafka_topic(self) -> str:
        return naming.kafka_topic(self._retry_topic)

    def prepare(self) -> None:
        """Create the group's retry topic (a consumer subscribes to it at start)."""
        self._ensure(self.retry_kafka_topic)

    def send(self, message: ReceivedMessage) -> bool:
        """Send a failed message back; True once Kafka acknowledged it. False to consume it
        again locally: that counts as a reconsumption too, so a message whose retry Kafka keeps
        refusing reaches the dead-letter topic after the same number of deliveries."""
        key = (message.kafka_topic, message.queue_id, message.queue_offset)
        try:
            producer = self._client()
            if message.reconsume_times >= self._config.max_reconsume_times:
                why = f"failed {message.reconsume_times + 1} deliveries (max reconsume times "
                why += f"{self._config.max_reconsume_times})"
                refused = self._refused.pop(key, None)
                if refused is not None:
                    why += f"; its last retry could not be sent: {refused}"
                self._send_dead_letter(producer, message, why)
            else:
                self._send_retry(producer, message)
                self._refused.pop(key, None)
            return True
        except (AdapterError, KafkaException) as exc:
            self._refused[key] = str(exc)
            while len(self._refused) > _REFUSALS_KEPT:
                self._refused.pop(next(iter(self._refused)))
            log.warning("send-back of %s failed (%s); consuming it again locally", message.id, exc)
            return False

    def dead_letter(self, message: ReceivedMessage, reason: str) -> None:
        """Move ``message`` to ``%DLQ%<group>`` now, with ``reason``, returning once Kafka
        acknowledged it; raises ``AdapterError`` or ``KafkaException`` otherwise (the 5.x
        ``SimpleConsumer`` decides itself when a message has had its attempts)."""
        self._send_dead_letter(self._client(), message, reason)

    def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            producer.flush(self._timeout_s())

    def _ensure(self, kafka_topic: str) -> None:
        admin = clients.admin(self._config.kafka.librdkafka({}), announce=True)
        ensure_single_queue_topic(admin, kafka_topic, self._timeout_s())

    def _send_retry(self, producer: Producer, message: ReceivedMessage) -> None:
        levels = self._config.delay_levels
        level = levels.clamp(3 + message.reconsume_times)
        record = sent_back(
            message,
            to_topic=self._retry_topic,
            level=level,
            max_reconsume_times=self._config.max_reconsume_times,
        )
        value = codec.encode(record)
        headers = [(prop.UNIQ_KEY, message.id.encode()), (prop.DELAY, str(level).encode())]
        headers += signed(value, self._config.schedule_signer)
        writing.produce_and_ack(
            producer,
            _SCHEDULE,
            value,
            timeout_s=self._timeout_s(),
            what=f"the retry of {message.id}",
            partition=level - 1,
            headers=headers,
        )

    def _send_dead_letter(self, producer: Producer, message: ReceivedMessage, why: str) -> None:
        topic = naming.kafka_topic(self._dlq_topic)
        if not self._dlq_ready:
            self._ensure(topic)
            self._dlq_ready = True
        record = dead_letter_record(
            message,
            self._dlq_topic,
            max_reconsume_times=self._config.max_reconsume_times,
            reason=why,
        )
        writing.produce_and_ack(
            producer,
            topic,
            record.value,
            timeout_s=self._timeout_s(),
            what=f"the dead letter {message.id}",
            partition=0,
            headers=record.headers,
        )
        log.warning("message %s moved to %s: %s", message.id, self._dlq_topic, why)

    def _client(self) -> Producer:
        with self._lock:
            if self._producer is None:
                self._producer = clients.producer(self._config.send_back_producer(), announce=True)
                schemas.install(self._config.kafka).wait(schemas.START_WAIT_S)
            return self._producer

    def _timeout_s(self) -> float:
        return self._config.send_back_timeout_ms / 1000
