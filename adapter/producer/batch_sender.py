"""``Producer.send_batch``'s shell: one Kafka transaction per batch, all visible or none.

Not in rocketmq-client-python 2.0 (rocketmq-client-python#108): the Java client's
``send(Collection<Message>)``, whose batch is one write to one queue, all stored or none. The
2.0 ``Producer`` writes through an idempotent producer without transactions, so a batch gets a
transactional producer of its own, made at the first batch. Its ``transactional.id`` is
``rmq-adapter-batch-<group>@<instance>-<random>``: the random part keeps two processes of one
group and instance name from fencing each other; a process that dies in a batch leaves its
transaction to the broker, which aborts it after :data:`TRANSACTION_TIMEOUT_MS`. The rules
(:mod:`adapter.producer.batch`) and each message's own checks run before the transaction
begins; a missing topic is asked for (created where the broker creates topics on use) before it
begins too. A failure inside the transaction aborts it: read_committed readers see none of the
batch. A commit that times out may have committed: the error says so, and each message keeps
its ``UNIQ_KEY`` for the retry.

Known gaps: the batch goes to the topic's partitions as librdkafka spreads it, not to one
queue. Batches of one producer are sent one at a time. Applications under ACLs need WRITE on
transactional ids with the prefix ``rmq-adapter-batch-``.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Sequence

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import Producer as KafkaProducer

from adapter.config import HEADROOM
from adapter.exceptions import AdapterError, DeliveryError, ProducerException
from adapter.kafka import clients, writing
from adapter.message import Message
from adapter.producer.batch import check_batch
from adapter.producer.sender import Outgoing, Sender, SendResult, SendStatus

log = logging.getLogger(__name__)

TRANSACTION_TIMEOUT_MS = 30_000
"""How long the broker keeps a dead producer's batch transaction open (and read_committed
readers of its partitions waiting) before it aborts it."""


class BatchSender:
    """Sends batches for one :class:`Sender`, each in a Kafka transaction of its own."""

    def __init__(self, sender: Sender) -> None:
        self._sender = sender
        config = sender.config
        self.transactional_id = (
            f"rmq-adapter-batch-{config.group}@{config.instance_name}-{uuid.uuid4().hex[:12]}"
        )
        self._producer: KafkaProducer | None = None
        self._lock = threading.Lock()

    def _settings(self) -> dict[str, object]:
        config = self._sender.config
        settings = config.producer_settings(self.transactional_id, HEADROOM)
        return config.kafka.librdkafka(
            {
                **settings,
                "transactional.id": self.transactional_id,
                "transaction.timeout.ms": max(TRANSACTION_TIMEOUT_MS, config.send_timeout_ms),
            }
        )

    def _started(self) -> KafkaProducer:
        if self._producer is None:
            producer = clients.producer(self._settings(), announce=True)
            producer.init_transactions(self._sender.timeout_s)
            self._producer = producer
        return self._producer

    def _drop(self) -> None:
        """Drop the producer: the next batch starts a new one, whose ``init_transactions``
        fences this one and ends its transaction."""
        producer, self._producer = self._producer, None
        if producer is not None:
            try:
                producer.purge()
                producer.flush(0)
            except KafkaException as exc:
                log.debug("a dropped batch producer refused to be flushed: %s", exc)

    def send(self, messages: Sequence[Message], error: type[ProducerException]) -> list[SendResult]:
        sender = self._sender
        try:
            check_batch(messages, sender.config.max_message_size)
            records = [sender.record(msg, msg.unique_key(), error) for msg in messages]
            sender.topics.require(records[0].topic, create=True, wait_s=sender.timeout_s)
        except (AdapterError, KafkaException) as exc:
            raise error(sender.with_address(exc)) from exc
        what = f"a batch of {len(messages)} for {messages[0].topic}"
        with self._lock:
            try:
                acks = self._in_transaction(records)
            except (AdapterError, KafkaException) as exc:
                raise error(f"{what} was not sent: {sender.with_address(exc)}") from exc
        return [
            SendResult(SendStatus.OK, msg.unique_key(), ack.offset)
            for msg, ack in zip(messages, acks, strict=True)
        ]

    def _in_transaction(self, records: Sequence[Outgoing]) -> list[writing.Ack]:
        timeout_s = self._sender.timeout_s
        producer = self._started()
        try:
            producer.begin_transaction()
        except KafkaException:
            self._drop()  # fenced, or in a state it cannot leave: the next batch starts anew
            raise
        try:
            acks = []
            for record in records:
                ack = writing.Ack()
                writing.produce(
                    producer,
                    record.topic,
                    record.value,
                    timeout_s=timeout_s,
                    on_delivery=ack,
                    **record.produce_kwargs(),
                )
                acks.append(ack)
            producer.flush(timeout_s + 1.0)  # serves the delivery reports
            for ack in acks:
                if not ack.done.is_set():
                    raise DeliveryError(f"no acknowledgement within {timeout_s:g} s")
                if ack.error is not None:
                    raise DeliveryError(
                        f"Kafka refused a message: {ack.error.str()}", kafka_error=ack.error
                    )
        except BaseException:
            # After a refused record librdkafka's idempotence state may need an epoch bump
            # (seen: the next batch purged for "skipped sequence numbers"): a new producer.
            self._abort()
            self._drop()
            raise
        self._commit()
        return acks

    def _commit(self) -> None:
        producer = self._started()
        try:
            producer.commit_transaction(self._sender.timeout_s)
        except KafkaException as exc:
            failure: KafkaError = exc.args[0]
            if failure.txn_requires_abort():
                self._abort()
                raise
            self._drop()
            raise AdapterError(
                f"the commit did not finish ({failure.str()}): the batch may be visible; "
                "each message keeps its UNIQ_KEY if it is sent again"
            ) from exc

    def _abort(self) -> None:
        producer = self._producer
        if producer is None:
            return
        try:
            producer.abort_transaction(self._sender.timeout_s)
        except KafkaException as exc:
            log.warning("aborting a batch failed (%s); its producer is replaced", exc)
            self._drop()

    def close(self) -> None:
        with self._lock:
            self._drop()
