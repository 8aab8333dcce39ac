"""One group commit's answer: acks refused with their partition's batch say so, and an ack
Kafka did not answer for is refused, never reported done."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Message, TopicPartition

from adapter.v5.group_commit import answer_group_commit
from adapter.v5.share_group import ACCEPT, RELEASE

pytestmark = pytest.mark.timeout(30)


def record(partition: int, offset: int) -> Message:
    return Message(topic="T", partition=partition, offset=offset)


LOCK_ENDED = KafkaException(KafkaError(KafkaError.INVALID_RECORD_STATE, "record state invalid"))


def test_acks_refused_with_their_partitions_batch_are_told_they_were_refused_together() -> None:
    """Kafka takes or refuses one partition's acknowledgements together: a caller whose own
    record was still locked learns that it shared a refused commit."""
    late = [(record(0, 1), ACCEPT)]
    on_time = [(record(0, 2), ACCEPT), (record(1, 3), ACCEPT)]
    answer = {TopicPartition("T", 0): LOCK_ENDED, TopicPartition("T", 1): None}

    [refused_late, refused_on_time] = answer_group_commit([late, on_time], answer)

    assert refused_on_time.keys() == {("T", 0)}
    assert refused_on_time[("T", 0)].shared_with == 1
    assert refused_late[("T", 0)].shared_with == 1
    assert refused_on_time[("T", 0)].error.code() == KafkaError.INVALID_RECORD_STATE
    assert "refused together with 1 other" in str(refused_on_time[("T", 0)])


def test_an_ack_kafka_did_not_answer_for_is_refused_not_reported_done() -> None:
    """librdkafka drops an ack batch locally when the partition's leader changed ('Ack batch
    ... dropped locally'); a partition missing from the commit's answer was not confirmed."""
    acks = [(record(0, 1), ACCEPT), (record(2, 9), RELEASE)]

    [refused] = answer_group_commit([acks], {TopicPartition("T", 0): None})

    assert refused.keys() == {("T", 2)}
    assert refused[("T", 2)].unconfirmed
    assert "did not confirm" in str(refused[("T", 2)])
