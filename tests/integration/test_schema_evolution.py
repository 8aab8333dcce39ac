"""A rolling upgrade: the records of the next release are read by today's workers.

The next release is simulated by writing what it would write: an END record of its
``EndTransaction`` schema, which appends one optional field, and that schema in
``RMQ_SYS_SCHEMAS``, as each process publishes its own at start. The reverse direction (the
next release reading today's records) is the same resolution, run by the unit tests of
``adapter.wire.codec`` with a next-release registry.
"""

from __future__ import annotations

import io
import json

import pytest
from fastavro import parse_schema, schemaless_writer
from fastavro.schema import fingerprint, to_parsing_canonical_form

from adapter import naming
from adapter.client import Message, TransactionStatus
from adapter.config import KafkaSettings
from adapter.kafka import clients
from adapter.transaction import admin
from adapter.wire import codec
from adapter.wire.records import RECORD_TYPES, EndTransaction
from tests.support import read_committed, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]

END = naming.kafka_topic(naming.TRANS_END_TOPIC)
SCHEMAS = naming.kafka_topic(naming.SCHEMAS_TOPIC)


def published(bootstrap: str) -> dict[str, str]:
    return {
        r.key().decode(): r.value().decode()
        for r in read_committed(bootstrap, naming.SCHEMAS_TOPIC, 0, timeout=3)
    }


def test_a_started_producer_has_published_every_schema_of_its_release(
    system_topics: str, make_producer
) -> None:
    make_producer()
    schemas = published(system_topics)
    for cls in RECORD_TYPES:
        text = schemas[codec.fingerprint(cls).hex()]
        assert json.loads(text) == json.loads(codec.schema_text(cls))


def test_a_decision_of_the_next_release_commits_its_message_once(
    system_topics: str, start_coordinator, make_transaction_producer, new_topic, new_group
) -> None:
    start_coordinator(transaction_timeout_ms=60_000, check_interval_ms=60_000)
    topic = new_topic(partitions=1)
    group = new_group("PG")
    producer = make_transaction_producer(group, lambda _msg: TransactionStatus.UNKNOWN)
    msg = Message(topic)
    msg.set_body("upgraded")
    sent = producer.send_message_in_transaction(msg, lambda *_a: None)  # no decision yet
    [row] = wait_until(
        lambda: [
            r
            for r in admin.pending(KafkaSettings(system_topics))
            if r.transaction_id == sent.msg_id
        ],
        timeout=30,
        what="the pending half message",
    )

    schema = json.loads(codec.schema_text(EndTransaction))
    schema["fields"].append(
        {"name": "decided_by", "type": ["null", "string"], "default": None, "doc": "New."}
    )
    fp = bytes.fromhex(fingerprint(to_parsing_canonical_form(schema), "CRC-64-AVRO"))
    body = io.BytesIO()
    schemaless_writer(
        body,
        parse_schema(schema),
        {
            "transaction_id": sent.msg_id,
            "producer_group": group,
            "half_partition": row.partition,
            "half_offset": row.offset,
            "decision": "COMMIT",
            "from_check": False,
            "check_times": 0,
            "remark": None,
            "timestamp": 0,
            "decided_by": "release 2",
        },
    )
    raw = clients.producer({"bootstrap.servers": system_topics})
    raw.produce(SCHEMAS, json.dumps(schema).encode(), key=fp.hex().encode())
    assert raw.flush(10) == 0, "the next release publishes its schemas before it writes"
    raw.produce(END, codec.MARKER + fp + body.getvalue(), partition=row.partition)
    assert raw.flush(10) == 0

    records = read_committed(system_topics, topic, 1)
    assert [r.value() for r in records] == [b"upgraded"]
