"""``rmq-adapter transactions list|resume``: pending and discarded transactional messages.

Reproduces what RocketMQ operators get from the broker: the pending half messages (RocketMQ
shows a count per topic, ``TransactionMetrics``; here each message with its age, check count
and group) and ``RESUME_CHECK_HALF_MESSAGE``, which puts a discarded message back into the half
topic with ``TRANSACTION_CHECK_TIMES`` reset to 0.

The pending list is rebuilt the way a coordinator rebuilds it on takeover: the OP records and
the half messages are read back from the coordinators' committed positions, through the same
state machine. Decisions the coordinators have read but not yet applied are not counted.

Beyond RocketMQ, resume is idempotent: the new half message and a ``resumed`` marker in
``TRANS_CHECK_MAX_TIME_TOPIC`` are written in one Kafka transaction whose transactional id is
the transaction id's, so of two concurrent resumes of one message exactly one commits (the
later ``init_transactions`` fences the earlier), and a resume that finds the marker refuses.
``list --discarded`` shows the marker: what was resumed, and when.

Known gaps: a resumed message is a new half message (new offset, born now, so it gets a full
transaction timeout and ``check_max`` checks); its original born time is kept in the
``BORN_TIMESTAMP`` property the committed message carries.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any, cast

from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka import Message as KafkaRecord

from adapter import naming
from adapter import properties as prop
from adapter.clock import SYSTEM_CLOCK, Clock
from adapter.config import DEFAULT_MAX_MESSAGE_SIZE, CheckPolicy, KafkaSettings
from adapter.exceptions import AdapterError
from adapter.kafka import clients, io, schemas
from adapter.kafka.topics import describe_configs, existing_half_partitions
from adapter.kafka.transactor import Transactor
from adapter.transaction.state import PartitionState, half_info
from adapter.wire import codec
from adapter.wire.records import HalfMessage, OpRecord

log = logging.getLogger("adapter.transaction.admin")

HALF = naming.kafka_topic(naming.TRANS_HALF_TOPIC)
OP = naming.kafka_topic(naming.TRANS_OP_TOPIC)
DISCARDED = naming.kafka_topic(naming.TRANS_CHECK_MAX_TIME_TOPIC)

EVENT = "event"
RESUMED = b"resumed"
RESUMED_AT = "resumed.at"
RESUMED_AS = "resumed.as"
MAX_MESSAGE_BYTES = "max.message.bytes"
RECORD_HEADROOM = 64 * 1024
"""Room above a half message for its record's headers and batch overhead."""
_LATEST_MS = 253_402_300_799_999
"""The last millisecond of year 9999: a later "resumed at" was not written by the adapter."""


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
    resumed_at_ms: int | None = None
    """When it was resumed (discarded rows only; ``None`` while it is not)."""
    resumed_as: str | None = None
    """The half message it was resumed as, ``partition@offset``."""


@dataclass(frozen=True, slots=True)
class Resumed:
    partition: int
    offset: int


def _half_partitions(kafka: KafkaSettings, timeout_s: float) -> int:
    metadata = clients.reach(kafka.librdkafka({}), timeout_s)
    readable = [HALF, OP]
    hidden = [t for t in readable if t not in metadata.topics]
    if hidden and HALF not in hidden:
        names = ", ".join(naming.decode(t) for t in hidden)
        raise AdapterError(
            f"cannot see topic {names}: the principal is not authorised to READ it, or it does "
            "not exist (ACLs: README; `rmq-adapter topics init` creates the system topics)"
        )
    count = existing_half_partitions(metadata)
    if count is None:
        raise AdapterError(
            f"{naming.TRANS_HALF_TOPIC} does not exist: run `rmq-adapter topics init`"
        )
    return count


def pending(
    kafka: KafkaSettings, timeout_s: float = 30.0, clock: Clock = SYSTEM_CLOCK
) -> list[Row]:
    """Every half message no coordinator has resolved, oldest first per partition."""
    count = _half_partitions(kafka, timeout_s)
    conf = kafka.librdkafka({})
    wanted = [TopicPartition(t, p) for p in range(count) for t in (HALF, OP)]
    offsets = io.committed_offsets(conf, naming.TRANS_COORDINATOR_GROUP, wanted, timeout_s)
    half_starts = {p: max(offsets[2 * p], 0) for p in range(count)}
    op_starts = {p: max(offsets[2 * p + 1], 0) for p in range(count)}
    states: dict[int, PartitionState[HalfMessage]] = {
        p: PartitionState(
            CheckPolicy(), half_start=half_starts[p], end_start=0, op_start=op_starts[p]
        )
        for p in range(count)
    }
    for record in io.read_to_end(conf, OP, op_starts, timeout_s, clock):
        try:
            op = io.decode(OpRecord, record, lookup=schemas.lookup_for(kafka))
        except AdapterError:
            continue
        states[record.partition() or 0].recover_op(op, record.offset() or 0)
    for state in states.values():
        state.recovery_done()
    now = clock.now_ms()
    for record in io.read_to_end(conf, HALF, half_starts, timeout_s, clock):
        state, offset = states[record.partition() or 0], record.offset() or 0
        try:
            half = io.decode(HalfMessage, record, lookup=schemas.lookup_for(kafka))
            info = half_info(half)
        except AdapterError:  # corrupt or never deliverable: not pending
            state.skip_half(offset)
            continue
        state.half(offset, info, half, now)
    return [
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


def _headers(record: KafkaRecord) -> dict[str, bytes]:
    return cast(dict[str, bytes], dict(record.headers() or []))


def _discard_log(kafka: KafkaSettings, timeout_s: float, clock: Clock) -> Iterator[KafkaRecord]:
    conf = kafka.librdkafka({})
    clients.reach(conf, timeout_s)
    yield from io.read_to_end(conf, DISCARDED, {0: -2}, timeout_s, clock)


def discarded(
    kafka: KafkaSettings, timeout_s: float = 30.0, clock: Clock = SYSTEM_CLOCK
) -> list[Row]:
    """Every message parked in ``TRANS_CHECK_MAX_TIME_TOPIC``, with the reason, and when it
    was resumed (the latest discard of each transaction; a message discarded again after a
    resume shows again)."""
    rows: dict[str, Row] = {}
    for record in _discard_log(kafka, timeout_s, clock):
        headers = _headers(record)
        tid = (record.key() or b"").decode("utf-8", "replace")
        if headers.get(EVENT) == RESUMED:
            if tid in rows:
                rows[tid] = replace(
                    rows[tid],
                    resumed_at_ms=int(headers.get(RESUMED_AT) or 0),
                    resumed_as=(headers.get(RESUMED_AS) or b"").decode(),
                )
            continue
        try:
            half = io.decode(HalfMessage, record, lookup=schemas.lookup_for(kafka))
        except AdapterError:
            continue
        rows.pop(half.transaction_id, None)  # keep the latest, in log order
        rows[half.transaction_id] = Row(
            transaction_id=half.transaction_id,
            producer_group=half.producer_group,
            topic=half.topic,
            partition=0,
            offset=record.offset() or 0,
            born_ms=half.born_timestamp,
            check_times=int(headers.get(prop.TRANSACTION_CHECK_TIMES) or 0),
            reason=(headers.get("reason") or b"").decode("utf-8", "replace"),
        )
    return list(rows.values())


def resume(
    kafka: KafkaSettings,
    transaction_id: str,
    *,
    timeout_s: float = 30.0,
    clock: Clock = SYSTEM_CLOCK,
) -> Resumed:
    """Write the discarded message of ``transaction_id`` back to HALF as a new half message,
    once, up to HALF's size limit: refused (``AdapterError``, saying why) when it was already
    resumed, is pending, was never discarded, or its records in the discard log were not
    written by the adapter."""
    conf = kafka.librdkafka({})
    clients.reach(conf, timeout_s)
    largest = _half_size_limit(conf, timeout_s)
    tx = Transactor(
        lambda: kafka.librdkafka(
            {
                "transactional.id": f"rmq-adapter-resume-{transaction_id}",
                "enable.idempotence": True,
                "acks": "all",
                "message.max.bytes": largest + RECORD_HEADROOM,
            }
        ),
        timeout_s=timeout_s,
        log=log,
        stopping=threading.Event(),
    )
    try:
        tx.producer  # noqa: B018 - fences any other resume of this transaction first
        found = _resumable(kafka, transaction_id, timeout_s, clock)
        properties = dict(found.properties)
        properties.setdefault(prop.BORN_TIMESTAMP, str(found.born_timestamp))
        properties.pop(prop.TRANSACTION_CHECK_TIMES, None)
        half = replace(found, properties=properties, born_timestamp=clock.now_ms())
        producer = tx.begin()
        ack = io.produce_and_ack(
            producer,
            HALF,
            codec.encode(half),
            timeout_s=timeout_s,
            what=f"the half message of {transaction_id}",
            key=transaction_id.encode(),
            headers=[(prop.UNIQ_KEY, transaction_id.encode())],
        )
        marker = [
            (EVENT, RESUMED),
            (prop.UNIQ_KEY, transaction_id.encode()),
            (RESUMED_AT, str(clock.now_ms()).encode()),
            (RESUMED_AS, f"{ack.partition}@{ack.offset}".encode()),
        ]
        tx.produce(DISCARDED, b"", key=transaction_id.encode(), headers=marker)
        tx.commit()
    except KafkaException as exc:
        error = exc.args[0]
        if error.fatal() or error.txn_requires_abort():
            raise AdapterError(
                f"another resume of {transaction_id} took over ({error.str()}); "
                "run `rmq-adapter transactions list --discarded` to see its outcome"
            ) from exc
        raise AdapterError(f"could not resume {transaction_id}: {error.str()}") from exc
    finally:
        tx.close()
    return Resumed(ack.partition, ack.offset)


def _resumable(
    kafka: KafkaSettings, transaction_id: str, timeout_s: float, clock: Clock
) -> HalfMessage:
    """The latest discarded half message of ``transaction_id``, unless resumed since."""
    key = transaction_id.encode()
    found: HalfMessage | None = None
    resumed: tuple[int, str] | None = None
    for record in _discard_log(kafka, timeout_s, clock):
        if (record.key() or b"") != key:
            continue
        headers = _headers(record)
        if headers.get(EVENT) == RESUMED:
            resumed = _resumed_marker(record, transaction_id)
            continue
        try:
            found, resumed = io.decode(HalfMessage, record, lookup=schemas.lookup_for(kafka)), None
        except AdapterError:
            continue
    if found is not None and resumed is None:
        return found
    if found is not None and resumed is not None:
        at_ms, as_half = resumed
        raise AdapterError(
            f"transaction {transaction_id} was already resumed, at {_when(at_ms)}, as half "
            f"message {as_half}; it is not resumed twice"
        )
    if any(row.transaction_id == transaction_id for row in pending(kafka, timeout_s, clock)):
        raise AdapterError(
            f"transaction {transaction_id} is pending, not discarded: the coordinator is "
            "still checking it (see `rmq-adapter transactions list`)"
        )
    raise AdapterError(
        f"transaction {transaction_id!r} is not in {naming.TRANS_CHECK_MAX_TIME_TOPIC}"
    )


def _half_size_limit(conf: dict[str, Any], timeout_s: float) -> int:
    """The largest record HALF takes (its ``max.message.bytes``): a resumed half message is
    as large as its discarded copy. RocketMQ's 4 MiB when the configuration cannot be read."""
    try:
        configs = describe_configs(clients.admin(conf), [HALF], timeout_s)
        return max(int(configs[HALF].get(MAX_MESSAGE_BYTES) or 0), DEFAULT_MAX_MESSAGE_SIZE)
    except (KafkaException, ValueError, KeyError):
        return DEFAULT_MAX_MESSAGE_SIZE


def _resumed_marker(record: KafkaRecord, transaction_id: str) -> tuple[int, str]:
    """When and as what a ``resumed`` marker says the transaction was resumed; an
    :class:`AdapterError` naming the record when a header is not what the adapter writes."""
    headers = _headers(record)
    at, as_half = headers.get(RESUMED_AT) or b"", headers.get(RESUMED_AS) or b"?"
    text = at.decode("ascii", "replace")
    problem = None
    if not text.isdigit() or not 0 <= int(text) <= _LATEST_MS:
        problem = f"{RESUMED_AT} {at[:40]!r} is not a time"
    elif not as_half.isascii():
        problem = f"{RESUMED_AS} {as_half[:40]!r} is not a partition@offset"
    if problem is not None:
        raise AdapterError(
            f"{naming.TRANS_CHECK_MAX_TIME_TOPIC} offset {record.offset()}: the 'resumed' marker "
            f"of {transaction_id} has {problem}; the adapter never writes that, so the record "
            "was forged or corrupted: not resuming until an operator has looked at it"
        )
    return int(text), as_half.decode()


def _when(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))


def _age(ms: int) -> str:
    seconds = max(0, ms) // 1000
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def render(rows: list[Row], *, discarded: bool = False, now_ms: int) -> str:
    """A plain-text table (pure: given the rows and the time)."""
    last = "reason" if discarded else "half"
    head = f"{'transaction id':<34}  {'group':<24}  {'topic':<24}  {'age':>5}  {'checks':>6}  "
    if discarded:
        head += f"{'resumed':<18}  "
    lines = [head + last]
    for row in rows:
        line = (
            f"{row.transaction_id:<34}  {row.producer_group:<24}  {row.topic:<24}  "
            f"{_age(now_ms - row.born_ms):>5}  {row.check_times:>6}  "
        )
        if discarded:
            resumed = (
                f"{_age(now_ms - row.resumed_at_ms)} ago" if row.resumed_at_ms is not None else "-"
            )
            line += f"{resumed:<18}  {row.reason or ''}"
        else:
            line += f"{row.partition}@{row.offset}"
        lines.append(line)
    if not rows:
        lines.append("  (none)")
    return "\n".join(lines)
