"""Records of the adapter's system topics, decoded by spark-avro: pure DataFrame transforms.

Reproduces nothing a RocketMQ consumer sees: these are the adapter's stand-ins for what a
RocketMQ broker keeps inside its commit log (half messages, op records, scheduled messages),
read here for telemetry. Each value is Avro single-object encoding (``adapter.wire.codec``): the
marker ``C3 01``, the schema's 8-byte CRC-64-AVRO fingerprint, then the Avro body. The body is
decoded with spark-avro's ``from_avro`` after those 10 bytes, with the schema read from the same
``.avsc`` file the writers use (``codec.schema_dir()``).

A record whose header names another schema, or whose body does not decode, is not dropped: its
row has ``record`` null and ``error`` saying why (``from_avro`` in PERMISSIVE mode), so a job
can count or park it.

Known gaps: spark-avro decodes what the schema can read and does not apply ``adapter.wire.codec``'s
canonical-encoding checks (trailing bytes, over-long varints, ...); timestamps come out as
Spark timestamps (``timestamp-millis``), enums as strings.
"""

from __future__ import annotations

import json
from functools import cache, reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro

from adapter import naming
from adapter.wire import codec
from adapter.wire.records import HalfMessage, OpRecord, Record, ScheduledMessage

SYSTEM_RECORDS: dict[str, type[Record]] = {
    naming.TRANS_HALF_TOPIC: HalfMessage,
    naming.TRANS_OP_TOPIC: OpRecord,
    naming.SCHEDULE_TOPIC: ScheduledMessage,
}
"""The system topics the telemetry reads, by RocketMQ (= Kafka) name, and their record type."""

HEADER_SIZE = codec.HEADER_SIZE


@cache
def schema_json(record_name: str) -> str:
    """The ``.avsc`` text of the record type named ``record_name``, as the writers load it."""
    return (codec.schema_dir() / f"{record_name}.avsc").read_text(encoding="utf-8")


def single_object_header(record_type: type[Record]) -> bytes:
    """The 10 bytes every record of ``record_type`` starts with: marker and fingerprint."""
    return codec.MARKER + codec.fingerprint(record_type)


def avro_body(value: Column) -> Column:
    """The Avro body of a single-object-encoded ``value``: everything after the 10 bytes."""
    return value.substr(F.lit(HEADER_SIZE + 1), F.length(value) - HEADER_SIZE)


def _required_fields(schema: str) -> list[str]:
    """Fields of a record schema that cannot be null (their type is not a union with null)."""
    fields = json.loads(schema)["fields"]
    return [f["name"] for f in fields if not (isinstance(f["type"], list) and "null" in f["type"])]


def decode_single_object(
    value: Column, header: bytes, schema: str, *, name: str = "record"
) -> tuple[Column, Column]:
    """``(record, error)`` columns for a single-object-encoded ``value`` of ``schema``.

    ``record`` is the decoded struct, null when the value is not one; ``error`` is null for a
    good record, else the reason (no marker, another schema's fingerprint, a body that does
    not decode).
    """
    head = F.substring(value, 1, HEADER_SIZE)
    good_header = head == F.lit(header)
    decoded = from_avro(avro_body(value), schema, {"mode": "PERMISSIVE"})
    # PERMISSIVE gives a struct of nulls for a body that does not decode; a field whose Avro
    # type is not a union with null is never null in a good record, so one such null tells.
    broken = reduce(
        Column.__or__,
        [decoded[name].isNull() for name in _required_fields(schema)],
        decoded.isNull(),
    )
    record = F.when(good_header & ~broken, decoded)
    error = (
        F.when(value.isNull(), F.lit("no value"))
        .when(F.length(value) < HEADER_SIZE, F.lit(f"shorter than the {HEADER_SIZE}-byte header"))
        .when(F.substring(value, 1, 2) != F.lit(codec.MARKER), F.lit("no single-object marker"))
        .when(~good_header, F.concat(F.lit("unknown schema fingerprint "), F.hex(head)))
        .when(broken, F.lit("body does not decode"))
    )
    return record.alias(name), error.alias("error")


def decode_system(kafka_rows: DataFrame, record_type: type[Record]) -> DataFrame:
    """Kafka source rows of one system topic as ``topic, queue_id, queue_offset,
    store_timestamp, record, error``; ``record`` holds the fields of ``record_type``."""
    header = single_object_header(record_type)
    record, error = decode_single_object(F.col("value"), header, schema_json(record_type.__name__))
    return kafka_rows.select(
        F.col("topic"),
        F.col("partition").alias("queue_id"),
        F.col("offset").alias("queue_offset"),
        F.col("timestamp").alias("store_timestamp"),
        record,
        error,
    )
