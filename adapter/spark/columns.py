"""Kafka records of a real topic as RocketMQ messages: pure DataFrame -> DataFrame transforms.

Reproduces what a RocketMQ consumer reads of a ``MessageExt`` (and what the adapter's
``ReceivedMessage`` gives), column by column, from the rows of Spark's Kafka source
(``includeHeaders=true``):

=================== ==========================================================================
``topic``           the RocketMQ topic name: the Kafka name decoded as ``adapter.naming.decode``
                    does (``.25`` -> ``%``, ``.7C`` -> ``|``), so ``%RETRY%GID_x`` for a retry
``queue_id``        the partition
``queue_offset``    the offset
``msg_id``          the ``UNIQ_KEY`` property; ``<kafka topic>-<partition>@<offset>`` for a
                    record written without one (as ``ReceivedMessage.id``)
``keys``, ``tags``  the ``KEYS`` and ``TAGS`` properties (null when absent)
``properties``      every header as a ``map<string,string>`` (UTF-8), system ones included; a
                    header repeated in one record keeps its last value, null values are left out
``body``            the record value (empty when null)
``born_timestamp``  the ``BORN_TIMESTAMP`` property (a forwarded, retried or transactional
                    message keeps its producer's time there), else (absent, not a number, or
                    outside the years 1 to 9999) the record timestamp
``store_timestamp`` the record timestamp: the broker's append time on ``LogAppendTime``
                    topics, else the time the record was produced (for a delayed message: when
                    the forwarder delivered it; for a transactional one: when the commit was
                    applied)
``reconsume_times`` the ``RECONSUME_TIME`` property, 0 when absent
``transaction_id``  the ``__transactionId__`` property (null for a non-transactional message)
``delay_level``     the ``DELAY`` property, 0 when absent
=================== ==========================================================================

Known gaps: ``delay_level`` is 0 on a delivered delayed message, because RocketMQ removes
``DELAY`` when the schedule service delivers it (``messageTimeUp``) and so does the adapter's
forwarder; such a message is recognised by its ``REAL_TOPIC``/``REAL_QID`` properties, and its
level is known from ``SCHEDULE_TOPIC_XXXX`` (the telemetry job joins the two). Properties that
are not UTF-8 are decoded with replacement characters. Spark's ``timestamp`` has microsecond
precision; Kafka's milliseconds fit exactly.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from adapter import properties as prop

MESSAGE_COLUMNS = (
    "topic",
    "queue_id",
    "queue_offset",
    "msg_id",
    "keys",
    "tags",
    "properties",
    "body",
    "born_timestamp",
    "store_timestamp",
    "reconsume_times",
    "transaction_id",
    "delay_level",
)
"""The reader's columns, in order."""


def decode_topic(kafka_topic: Column) -> Column:
    """The RocketMQ name of a Kafka topic name, as :func:`adapter.naming.decode` computes it.

    The two escapes begin with ``.`` and hold no ``.`` after it, so they never overlap and two
    replacements in turn equal naming's single left-to-right pass.
    """
    return F.regexp_replace(F.regexp_replace(kafka_topic, r"\.25", "%"), r"\.7C", "|")


def header_map(headers: Column) -> Column:
    """Kafka headers (``array<struct<key,value>>``) as ``map<string,string>``: null values left
    out, the last value of a repeated key kept (``dict(headers)`` in the adapter's consumer).

    The common record (no repeated key, no null value) takes a path without lambda functions,
    which Spark evaluates several times faster; the general path filters with lambdas."""
    keys = headers.getField("key")
    values = headers.getField("value")
    simple = (F.size(F.array_distinct(keys)) == F.size(keys)) & (
        F.size(F.array_compact(values)) == F.size(values)
    )
    fast = F.map_from_arrays(keys, values.cast("array<string>"))
    present = F.filter(headers, lambda h: h["value"].isNotNull())
    last_of_key = F.filter(
        present,
        lambda h, i: (
            ~F.exists(
                F.slice(present, i + 2, F.greatest(F.size(present) - i - 1, F.lit(0))),
                lambda later: later["key"] == h["key"],
            )
        ),
    )
    entries = F.transform(
        last_of_key,
        lambda h: F.struct(h["key"].alias("key"), h["value"].cast("string").alias("value")),
    )
    general = F.map_from_entries(F.coalesce(entries, F.array()))
    empty = F.create_map().cast("map<string,string>")
    return F.when(headers.isNull(), empty).when(simple, fast).otherwise(general)


def _try_number(name: str, kind: str) -> Column:
    """Property ``name`` of the ``properties`` column as ``kind``; null when absent or not a
    number (``ReceivedMessage`` reads an unparsable number as 0 too)."""
    return F.expr(f"try_cast(properties['{name}'] as {kind})")


_TIMESTAMP_MS = (-62_135_596_800_000, 253_402_300_799_999)
"""The milliseconds Spark's ``timestamp`` holds: years 0001 to 9999."""


def _millis(ms: Column) -> Column:
    """Milliseconds since the epoch as a timestamp; null when out of the timestamp's range
    (``timestamp_millis`` overflows there, which fails the whole batch)."""
    return F.when(ms.between(*_TIMESTAMP_MS), F.timestamp_millis(ms))


def rocketmq_columns(kafka_rows: DataFrame) -> DataFrame:
    """Rows of Spark's Kafka source (with headers) as :data:`MESSAGE_COLUMNS`."""
    props = F.col("properties")
    uniq = props.getItem(prop.UNIQ_KEY)
    fallback_id = F.concat(
        F.col("topic"),
        F.lit("-"),
        F.col("partition").cast("string"),
        F.lit("@"),
        F.col("offset").cast("string"),
    )
    zero = F.lit(0)
    return kafka_rows.withColumn("properties", header_map(F.col("headers"))).select(
        decode_topic(F.col("topic")).alias("topic"),
        F.col("partition").alias("queue_id"),
        F.col("offset").alias("queue_offset"),
        F.when(uniq.isNotNull() & (uniq != ""), uniq).otherwise(fallback_id).alias("msg_id"),
        props.getItem(prop.KEYS).alias("keys"),
        props.getItem(prop.TAGS).alias("tags"),
        props.alias("properties"),
        F.coalesce(F.col("value"), F.lit(b"")).alias("body"),
        F.coalesce(_millis(_try_number(prop.BORN_TIMESTAMP, "bigint")), F.col("timestamp")).alias(
            "born_timestamp"
        ),
        F.col("timestamp").alias("store_timestamp"),
        F.coalesce(_try_number(prop.RECONSUME_TIME, "int"), zero).alias("reconsume_times"),
        props.getItem(prop.TRANSACTION_ID).alias("transaction_id"),
        F.coalesce(_try_number(prop.DELAY, "int"), zero).alias("delay_level"),
    )
