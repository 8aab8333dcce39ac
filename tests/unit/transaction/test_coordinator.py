"""The coordinator's checks of a record before its state sees it (no Kafka needed)."""

from __future__ import annotations

import pytest
from confluent_kafka import Message as KafkaRecord

from adapter import naming
from adapter.config import KafkaSettings
from adapter.exceptions import UnusableRecordError
from adapter.transaction.config import CoordinatorConfig
from adapter.transaction.coordinator import TransactionCoordinator
from adapter.wire import codec
from adapter.wire.records import EndTransaction, OpKind, OpRecord, TransactionDecision

END = naming.kafka_topic(naming.TRANS_END_TOPIC)
OP = naming.kafka_topic(naming.TRANS_OP_TOPIC)


def coordinator() -> TransactionCoordinator:
    return TransactionCoordinator(CoordinatorConfig(KafkaSettings("127.0.0.1:9"), worker_id="t"))


def end_for(half_partition: int) -> bytes:
    return codec.encode(
        EndTransaction(
            transaction_id="t0",
            producer_group="PG",
            half_partition=half_partition,
            half_offset=3,
            decision=TransactionDecision.COMMIT,
            from_check=False,
            timestamp=0,
        )
    )


def test_a_decision_on_the_end_partition_of_its_half_message_is_read() -> None:
    record = KafkaRecord(topic=END, partition=2, offset=7, value=end_for(2))
    end = coordinator()._decode_routed(EndTransaction, record, "decision")
    assert (end.half_partition, end.half_offset) == (2, 3)


def test_a_decision_or_op_record_on_another_partition_is_refused_as_misrouted() -> None:
    misrouted = KafkaRecord(topic=END, partition=5, offset=7, value=end_for(2))
    with pytest.raises(UnusableRecordError) as refused:
        coordinator()._decode_routed(EndTransaction, misrouted, "decision")
    assert refused.value.reason.startswith("misrouted")
    assert "decision of half partition 2 written to RMQ_SYS_TRANS_END_TOPIC partition 5" in str(
        refused.value
    )
    op = OpRecord(
        transaction_id="t0",
        half_partition=1,
        half_offset=3,
        kind=OpKind.COMMIT,
        check_times=0,
        producer_group="PG",
        timestamp=0,
    )
    record = KafkaRecord(topic=OP, partition=4, offset=0, value=codec.encode(op))
    with pytest.raises(UnusableRecordError, match="OP record of half partition 1"):
        coordinator()._decode_routed(OpRecord, record, "OP record")
