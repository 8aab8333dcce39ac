"""One valid example of each system-topic record, for the codec's tests and the fuzzed wire."""

from __future__ import annotations

from typing import Any

from adapter.wire.records import (
    CheckRequest,
    EndTransaction,
    HalfMessage,
    OpKind,
    OpRecord,
    Record,
    ScheduledMessage,
    TransactionDecision,
)

EXAMPLES: dict[type[Any], Record] = {
    HalfMessage: HalfMessage(
        transaction_id="7F00000100012A9F",
        producer_group="please_rename_unique_group_name",
        topic="TopicTest",
        queue_id=-1,
        tags="TagA",
        keys="order-1 order-2",
        properties={"UNIQ_KEY": "7F00000100012A9F", "TRAN_MSG": "true", "é": "☃"},
        body=b"Hello RocketMQ",
        born_timestamp=1_700_000_000_000,
    ),
    EndTransaction: EndTransaction(
        transaction_id="7F00000100012A9F",
        producer_group="please_rename_unique_group_name",
        half_partition=3,
        half_offset=42,
        decision=TransactionDecision.COMMIT,
        from_check=False,
        timestamp=1_700_000_000_500,
    ),
    OpRecord: OpRecord(
        transaction_id="7F00000100012A9F",
        half_partition=3,
        half_offset=42,
        kind=OpKind.DISCARD,
        check_times=15,
        producer_group="please_rename_unique_group_name",
        reason="too many checks",
        timestamp=1_700_000_900_000,
    ),
    CheckRequest: CheckRequest(
        transaction_id="7F00000100012A9F",
        producer_group="please_rename_unique_group_name",
        half_partition=3,
        half_offset=42,
        check_times=1,
        topic="TopicTest",
        queue_id=0,
        tags=None,
        keys=None,
        properties={},
        body=b"",
        born_timestamp=1_700_000_000_000,
        requested_at=1_700_000_060_000,
    ),
    ScheduledMessage: ScheduledMessage(
        level=3,
        topic="TopicTest",
        queue_id=-1,
        key=b"\x00\xff",
        tags="TagB",
        keys=None,
        properties={"DELAY": "3"},
        body=b"later",
        born_timestamp=1_700_000_000_000,
        unique_key="7F00000100012A9F",
    ),
}
