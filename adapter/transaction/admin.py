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
``list --discarded`` shows the marker (what was resumed, and when) and what became of the
resumed half message since: the COMMIT, ROLLBACK or DISCARD its OP partition holds for it, read
from the resume's time on, or "pending again". A record of the discard log the adapter did not
write (a forged marker, a check count that is not a count) is left out of the list with one
line saying which; ``resume`` refuses to go on past such a marker.

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
from adapter.config import DEFAULT_MAX_MESSAGE_SIZE, KafkaSettings
from adapter.exceptions import AdapterError
from adapter.kafka import clients, reading, schemas, writing
from adapter.kafka.metadata import committed_offsets
from adapter.kafka.topics import describe_configs, existing_half_partitions
from adapter.kafka.transactor import Transactor
from adapter.transaction.config import CheckPolicy
from adapter.transaction.state import PartitionState, half_info
from adapter.wire import codec
from adapter.wire.records import HalfMessage, OpRecord

log = logging.getLogger(__name__)

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
    outcome: str | None = None
    """What became of it once resumed: ``committed``, ``rolled back``, ``discarded again`` or
    ``pending again`` (discarded rows only; ``None`` while it is not resumed)."""


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
            "not exist (ACLs: docs/production.md; `rmq-adapter topics init` creates the system "
            "topics)"
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
    offsets = committed_offsets(conf, naming.TRANS_COORDINATOR_GROUP, wanted, timeout_s)
    half_starts = {p: max(offsets[2 * p], 0) for p in range(count)}
    op_starts = {p: max(offsets[2 * p + 1], 0) for p in range(count)}
    states: dict[int, PartitionState[HalfMessage]] = {
        p: PartitionState(
            CheckPolicy(), half_start=half_starts[p], end_start=0, op_start=op_starts[p]
        )
        for p in range(count)
    }
    for record in reading.read_to_end(conf, OP, op_starts, timeout_s, clock):
        try:
            op = reading.decode(OpRecord, record, lookup=schemas.lookup_for(kafka))
        except AdapterError:
            continue
        states[record.partition() or 0].recover_op(op, record.offset() or 0)
    for state in states.values():
        state.recovery_done()
    now = clock.now_ms()
    for record in reading.read_to_end(conf, HALF, half_starts, timeout_s, clock):
        state, offset = states[record.partition() or 0], record.offset() or 0
        try:
            half = reading.decode(HalfMessage, record, lookup=schemas.lookup_for(kafka))
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
    yield from reading.read_to_end(conf, DISCARDED, {0: -2}, timeout_s, clock)


def discarded(
    kafka: KafkaSettings,
    timeout_s: float = 30.0,
    clock: Clock = SYSTEM_CLOCK,
    *,
    skipped: list[str] | None = None,
) -> list[Row]:
    """Every message parked in ``TRANS_CHECK_MAX_TIME_TOPIC``, with the reason, when it was
    resumed and what became of it since (the latest discard of each transaction; a message
    discarded again after a resume shows again). A record the adapter did not write (a marker
    whose time is not a time, a header that is not a count) is left out, with one line
    saying which and why added to ``skipped``."""
    rows: dict[str, Row] = {}
    skipped = [] if skipped is None else skipped
    for record in _discard_log(kafka, timeout_s, clock):
        headers = _headers(record)
        tid = (record.key() or b"").decode("utf-8", "replace")
        try:
            if headers.get(EVENT) == RESUMED:
                at_ms, as_half = _resumed_marker(record, tid)
                if tid in rows:
                    rows[tid] = replace(rows[tid], resumed_at_ms=at_ms, resumed_as=as_half)
                continue
            half = reading.decode(HalfMessage, record, lookup=schemas.lookup_for(kafka))
            checks = _count(headers, prop.TRANSACTION_CHECK_TIMES, record, tid)
        except AdapterError as exc:
            skipped.append(f"skipped {exc}")
            continue
        rows.pop(half.transaction_id, None)  # keep the latest, in log order
        rows[half.transaction_id] = Row(
            transaction_id=half.transaction_id,
            producer_group=half.producer_group,
            topic=half.topic,
            partition=0,
            offset=record.offset() or 0,
            born_ms=half.born_timestamp,
            check_times=checks,
            reason=(headers.get("reason") or b"").decode("utf-8", "replace"),
        )
    return _with_outcomes(kafka, list(rows.values()), timeout_s, clock)


def _count(headers: dict[str, bytes], name: str, record: KafkaRecord, tid: str) -> int:
    raw = headers.get(name) or b"0"
    if not raw.isdigit() or len(raw) > 9:
        raise AdapterError(
            f"{naming.TRANS_CHECK_MAX_TIME_TOPIC} offset {record.offset()}: the discarded "
            f"message of {tid} has {name} {raw[:40]!r}, which is not a count; the adapter "
            "never writes that"
        )
    return int(raw)


_OUTCOMES = {"COMMIT": "committed", "ROLLBACK": "rolled back", "DISCARD": "discarded again"}


def _resumed_at(row: Row) -> tuple[int, int] | None:
    partition, _, offset = (row.resumed_as or "").partition("@")
    return (int(partition), int(offset)) if partition.isdigit() and offset.isdigit() else None


def _with_outcomes(
    kafka: KafkaSettings, rows: list[Row], timeout_s: float, clock: Clock
) -> list[Row]:
    """``rows`` with the outcome of each resumed one: the COMMIT, ROLLBACK or DISCARD that OP
    holds for the half message it was resumed as, read from the resume's time on; none yet
    means it is pending again."""
    since: dict[int, int] = {}
    for row in rows:
        at = _resumed_at(row)
        if at is not None and row.resumed_at_ms is not None:
            since[at[0]] = min(since.get(at[0], row.resumed_at_ms), row.resumed_at_ms)
    if not since:
        return rows
    conf = kafka.librdkafka({})
    found: dict[tuple[int, int], str] = {}
    for record in reading.read_to_end(
        conf, OP, _offsets_at(conf, since, timeout_s), timeout_s, clock
    ):
        try:
            op = reading.decode(OpRecord, record, lookup=schemas.lookup_for(kafka))
        except AdapterError:
            continue
        if op.kind.value in _OUTCOMES:
            found[(op.half_partition, op.half_offset)] = _OUTCOMES[op.kind.value]
    return [
        replace(row, outcome=found.get(at, "pending again"))
        if (at := _resumed_at(row)) is not None
        else row
        for row in rows
    ]


def _offsets_at(conf: dict[str, Any], since: dict[int, int], timeout_s: float) -> dict[int, int]:
    """The first OP offset of each partition at or after its time (its end when none is)."""
    asker = clients.consumer({**conf, "group.id": "rmq-adapter-admin", **reading.READER_SETTINGS})
    try:
        asked = [TopicPartition(OP, p, ms) for p, ms in since.items()]
        answered = asker.offsets_for_times(asked, timeout=timeout_s)
    finally:
        asker.close()
    ends = reading.log_ends(conf, OP, list(since), timeout_s)
    return {tp.partition: tp.offset if tp.offset >= 0 else ends[tp.partition] for tp in answered}


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
        tx.open()  # fences any other resume of this transaction first
        found = _resumable(kafka, transaction_id, timeout_s, clock)
        properties = dict(found.properties)
        properties.setdefault(prop.BORN_TIMESTAMP, str(found.born_timestamp))
        properties.pop(prop.TRANSACTION_CHECK_TIMES, None)
        half = replace(found, properties=properties, born_timestamp=clock.now_ms())
        producer = tx.begin()
        ack = writing.produce_and_ack(
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
            found = reading.decode(HalfMessage, record, lookup=schemas.lookup_for(kafka))
            resumed = None
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
