"""``rmq-adapter transactions list|resume``: pending and discarded transactional messages.

Reproduces what RocketMQ operators get from the broker: the pending half messages (RocketMQ
shows a count per topic, ``TransactionMetrics``; here each message with its age, check count
and group) and ``RESUME_CHECK_HALF_MESSAGE``, which puts a discarded message back into the half
topic with ``TRANSACTION_CHECK_TIMES`` reset to 0.

The pending list is rebuilt the way a coordinator rebuilds it on takeover: the OP records and
the half messages are read back from the coordinators' committed positions, through the same
state machine. Decisions the coordinators have read but not yet applied are not counted.

Known gaps: a resumed message is a new half message (new offset, born now, so it gets a full
transaction timeout and ``check_max`` checks); its original born time is kept in the
``BORN_TIMESTAMP`` property the committed message carries.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import cast

from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from adapter import codec, naming
from adapter import properties as prop
from adapter.config import KafkaSettings
from adapter.exceptions import AdapterError, CodecError
from adapter.read_back import read_to_end
from adapter.records import HalfMessage, OpRecord
from adapter.status import committed_offsets
from adapter.transaction.state import CheckPolicy, PartitionState, half_info

HALF = naming.kafka_topic(naming.TRANS_HALF_TOPIC)
OP = naming.kafka_topic(naming.TRANS_OP_TOPIC)
DISCARDED = naming.kafka_topic(naming.TRANS_CHECK_MAX_TIME_TOPIC)
_READ_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class Row:
    transaction_id: str
    producer_group: str
    topic: str
    partition: int
    offset: int
    born_ms: int
    check_times: int
    reason: str | None = None


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _half_partitions(kafka: KafkaSettings) -> int:
    metadata = AdminClient(kafka.librdkafka({})).list_topics(timeout=30)
    info = metadata.topics.get(HALF)
    if info is None or not info.partitions:
        raise AdapterError(
            f"{naming.TRANS_HALF_TOPIC} does not exist: run `rmq-adapter topics init`"
        )
    return len(info.partitions)


def pending(kafka: KafkaSettings) -> list[Row]:
    """Every half message no coordinator has resolved, oldest first per partition."""
    count = _half_partitions(kafka)
    wanted = [TopicPartition(t, p) for p in range(count) for t in (HALF, OP)]
    offsets = committed_offsets(kafka, naming.TRANS_COORDINATOR_GROUP, wanted)
    half_starts = {p: max(offsets[2 * p], 0) for p in range(count)}
    op_starts = {p: max(offsets[2 * p + 1], 0) for p in range(count)}
    states: dict[int, PartitionState[HalfMessage]] = {
        p: PartitionState(
            CheckPolicy(), half_start=half_starts[p], end_start=0, op_start=op_starts[p]
        )
        for p in range(count)
    }
    reader = kafka.librdkafka({})
    for record in read_to_end(reader, OP, op_starts, _READ_TIMEOUT_S):
        try:
            op = codec.decode_as(OpRecord, record.value() or b"")
        except CodecError:
            continue
        states[record.partition() or 0].recover_op(op, record.offset() or 0)
    for state in states.values():
        state.recovery_done()
    now = _now_ms()
    for record in read_to_end(reader, HALF, half_starts, _READ_TIMEOUT_S):
        state, offset = states[record.partition() or 0], record.offset() or 0
        try:
            half = codec.decode_as(HalfMessage, record.value() or b"")
            info = half_info(half)
        except AdapterError:  # corrupt (CodecError) or never deliverable: not pending
            state.skip_half(offset)
            continue
        state.half(offset, info, half, now)
    rows = [
        Row(
            transaction_id=entry.info.transaction_id,
            producer_group=entry.info.producer_group,
            topic=entry.payload.topic,
            partition=p,
            offset=entry.offset,
            born_ms=entry.info.born_ms,
            check_times=entry.check_times,
        )
        for p, state in states.items()
        for entry in state.pending()
    ]
    return rows


def discarded(kafka: KafkaSettings) -> list[Row]:
    """Every message parked in ``TRANS_CHECK_MAX_TIME_TOPIC``, with the reason."""
    rows: list[Row] = []
    for record in read_to_end(kafka.librdkafka({}), DISCARDED, {0: -2}, _READ_TIMEOUT_S):
        headers = cast(dict[str, bytes], dict(record.headers() or []))
        try:
            half = codec.decode_as(HalfMessage, record.value() or b"")
        except CodecError:
            continue
        rows.append(
            Row(
                transaction_id=half.transaction_id,
                producer_group=half.producer_group,
                topic=half.topic,
                partition=0,
                offset=record.offset() or 0,
                born_ms=half.born_timestamp,
                check_times=int(headers.get(prop.TRANSACTION_CHECK_TIMES) or 0),
                reason=(headers.get("reason") or b"").decode("utf-8", "replace"),
            )
        )
    return rows


def resume(kafka: KafkaSettings, transaction_id: str) -> tuple[int, int]:
    """Write the discarded message of ``transaction_id`` back to HALF as a new half message;
    return its partition and offset."""
    found: HalfMessage | None = None
    for record in read_to_end(kafka.librdkafka({}), DISCARDED, {0: -2}, _READ_TIMEOUT_S):
        if (record.key() or b"") == transaction_id.encode():
            try:
                found = codec.decode_as(HalfMessage, record.value() or b"")
            except CodecError:
                continue
    if found is None:
        raise AdapterError(
            f"transaction {transaction_id!r} is not in {naming.TRANS_CHECK_MAX_TIME_TOPIC}"
        )
    properties = dict(found.properties)
    properties.setdefault(prop.BORN_TIMESTAMP, str(found.born_timestamp))
    properties.pop(prop.TRANSACTION_CHECK_TIMES, None)
    half = replace(found, properties=properties, born_timestamp=_now_ms())
    producer = Producer(kafka.librdkafka({"enable.idempotence": True, "acks": "all"}))
    result: dict[str, int] = {}

    def delivered(error: object, msg: object) -> None:
        if error is None:
            result["partition"] = msg.partition()  # type: ignore[attr-defined]
            result["offset"] = msg.offset()  # type: ignore[attr-defined]

    try:
        producer.produce(
            HALF,
            codec.encode(half),
            key=transaction_id.encode(),
            headers=[(prop.UNIQ_KEY, transaction_id.encode())],
            on_delivery=delivered,
        )
        producer.flush(30)
    except KafkaException as exc:
        raise AdapterError(f"could not write the half message back: {exc}") from exc
    if "offset" not in result:
        raise AdapterError("the half message was not acknowledged within 30 s")
    return result["partition"], result["offset"]


def _age(ms: int) -> str:
    seconds = max(0, ms) // 1000
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def render(rows: list[Row], *, discarded: bool = False, now_ms: int | None = None) -> str:
    """A plain-text table (pure: given the rows and the time)."""
    now = _now_ms() if now_ms is None else now_ms
    last = "reason" if discarded else "half"
    lines = [
        f"{'transaction id':<34}  {'group':<24}  {'topic':<24}  {'age':>5}  {'checks':>6}  {last}"
    ]
    for row in rows:
        tail = row.reason or "" if discarded else f"{row.partition}@{row.offset}"
        lines.append(
            f"{row.transaction_id:<34}  {row.producer_group:<24}  {row.topic:<24}  "
            f"{_age(now - row.born_ms):>5}  {row.check_times:>6}  {tail}"
        )
    if not rows:
        lines.append("  (none)")
    return "\n".join(lines)
