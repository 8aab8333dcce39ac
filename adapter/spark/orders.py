"""The points job's business event, ``OrderPaid``: its Avro schema, encoder and Spark decoder.

Reproduces the seeds' business case: an order service takes a payment in a local database
transaction and, in the same transaction, sends "order paid" as a RocketMQ transactional
message (``TransactionMQProducer``), so the event exists if and only if the payment committed.
The body is Avro, from ``adapter/spark/schemas/OrderPaid.avsc`` (namespace ``rmqkafka.demo``,
apart from the adapter's system records in ``rmqkafka.v1``), in the same single-object
encoding as the system records: marker ``C3 01``, the schema's CRC-64-AVRO fingerprint, the
body. So a consumer can tell an ``OrderPaid`` from anything else put on the topic.

Known gaps: one schema version; a body written with another version of the schema is rejected
(its fingerprint differs) rather than resolved.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from importlib import resources
from typing import Any

from fastavro import parse_schema, schemaless_writer
from fastavro.schema import fingerprint, to_parsing_canonical_form
from pyspark.sql import Column
from pyspark.sql import functions as F

from adapter.spark.system_topics import decode_single_object
from adapter.wire import codec

SCHEMA_FILE = "OrderPaid.avsc"
CENTS = Decimal("0.01")


@dataclass(frozen=True, slots=True)
class OrderPaid:
    order_id: str
    user_id: str
    amount: Decimal
    """Currency units, two decimals."""
    currency: str
    paid_at: int
    """Epoch milliseconds."""


@cache
def schema_text() -> str:
    """``adapter/spark/schemas/OrderPaid.avsc`` (package data)."""
    return (resources.files("adapter.spark") / "schemas" / SCHEMA_FILE).read_text(encoding="utf-8")


@cache
def _parsed() -> tuple[Any, bytes]:
    raw = json.loads(schema_text())
    canonical = to_parsing_canonical_form(raw)
    header = codec.MARKER + bytes.fromhex(fingerprint(canonical, "CRC-64-AVRO"))
    return parse_schema(raw), header


def header() -> bytes:
    """The 10 bytes every encoded ``OrderPaid`` starts with."""
    return _parsed()[1]


def encode(event: OrderPaid) -> bytes:
    """``event`` as Avro single-object encoding (the message body the order service sends)."""
    schema, head = _parsed()
    if event.amount < 0:
        raise ValueError(f"an OrderPaid amount is never negative, got {event.amount}")
    datum = {
        "order_id": event.order_id,
        "user_id": event.user_id,
        "amount": Decimal(event.amount).quantize(CENTS),
        "currency": event.currency,
        "paid_at": event.paid_at,
    }
    out = io.BytesIO()
    out.write(head)
    schemaless_writer(out, schema, datum)
    return out.getvalue()


def decode_column(body: Column) -> tuple[Column, Column]:
    """``(order, error)`` columns for message bodies: the decoded ``OrderPaid`` struct (null
    when the body is not one) and why not (null when it is)."""
    return decode_single_object(body, header(), schema_text(), name="order")


def points_for(amount: Column) -> Column:
    """1 point per whole currency unit paid (``floor(amount)``)."""
    return F.floor(amount).cast("bigint")
