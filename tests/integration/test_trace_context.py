"""A W3C ``traceparent`` set by a producer reaches the consumer through every hop the adapter
adds (the half message and its check-back, a timer's SCHEDULE hop, a consumer retry), and a
worker's log line about one message names it.

Tracing across RocketMQ needs ``enableTrace`` on every client; here the message's properties are
its headers at every hop, so a trace context an application (or OpenTelemetry's propagator)
puts there goes through unchanged.
"""

from __future__ import annotations

import logging
import threading
import time

import pytest

from adapter import naming
from adapter import properties as prop
from adapter.client import ConsumeStatus, Message, TransactionStatus
from adapter.kafka import clients
from adapter.schedule.envelope import scheduled
from adapter.v5 import Message as V5Message
from adapter.wire import codec
from tests.support import read_committed, unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]

TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def trace_of(record) -> bytes | None:  # type: ignore[no-untyped-def]
    return dict(record.headers() or []).get("traceparent")


def test_a_transaction_settled_by_its_check_back_keeps_the_trace_context(
    system_topics, start_coordinator, make_transaction_producer, new_topic
) -> None:
    start_coordinator(transaction_timeout_ms=1500, check_interval_ms=1000, check_max=3)
    topic = new_topic(1, "Traced")
    producer = make_transaction_producer(unique("PG"), lambda _m: TransactionStatus.COMMIT)
    message = Message(topic)
    message.set_body("paid")
    message.set_property("traceparent", TRACE)
    producer.send_message_in_transaction(message, lambda *_: TransactionStatus.UNKNOWN)
    [record] = read_committed(system_topics, topic, 1)
    assert trace_of(record) == TRACE.encode()
    assert prop.TRANSACTION_CHECK_TIMES in dict(record.headers()), "it went through a check"


def test_a_timer_message_keeps_the_trace_context_through_schedule(
    system_topics, start_forwarder, make_v5_producer, new_topic
) -> None:
    start_forwarder()
    topic = new_topic(1, "TracedTimer")
    producer = make_v5_producer()
    message = V5Message()
    message.topic = topic
    message.body = b"later"
    message.add_property("traceparent", TRACE)
    message.delivery_timestamp = int(time.time() * 1000) + 2_000
    producer.send(message)
    [record] = read_committed(system_topics, topic, 1, timeout=60)
    assert trace_of(record) == TRACE.encode()


def test_a_retried_message_keeps_the_trace_context(
    system_topics, start_forwarder, new_topic, make_producer, make_consumer
) -> None:
    start_forwarder()
    topic, group = new_topic(1, "TracedRetry"), unique("GID_trace")
    seen: list[tuple[int, str | None]] = []
    lock = threading.Lock()

    def fail_once(message) -> ConsumeStatus:  # type: ignore[no-untyped-def]
        with lock:
            seen.append((message.reconsume_times, message.get_property("traceparent")))
            first = len(seen) == 1
        return ConsumeStatus.RECONSUME_LATER if first else ConsumeStatus.CONSUME_SUCCESS

    make_consumer(group, topic, fail_once, bootstrap=system_topics)
    message = Message(topic)
    message.set_body("retried")
    message.set_property("traceparent", TRACE)
    make_producer(bootstrap=system_topics).send_sync(message)
    wait_until(lambda: len(seen) >= 2, timeout=60, what="the retry (level 3, 10 s)")
    traces = [trace.decode() if isinstance(trace, bytes) else trace for _, trace in seen]
    assert [times for times, _ in seen[:2]] == [0, 1]
    assert traces[:2] == [TRACE, TRACE]


def test_a_record_the_forwarder_parks_is_logged_with_its_message_id(
    system_topics, start_forwarder, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="adapter.schedule")
    start_forwarder()
    forged = Message(naming.CHECK_PREFIX + unique("PG"))  # no application may address a check
    forged.set_body("forged")
    msg_id = unique("FORGED")
    value = codec.encode(scheduled(forged, level=1, unique_key=msg_id, born_ms=0))
    raw = clients.producer({"bootstrap.servers": system_topics})
    raw.produce(naming.kafka_topic(naming.SCHEDULE_TOPIC), value, partition=0)
    assert raw.flush(10) == 0
    parked = wait_until(
        lambda: [r for r in caplog.records if "parked" in r.getMessage()],
        timeout=30,
        what="the park's log line",
    )
    assert f"(message {msg_id})" in parked[0].getMessage()
    assert getattr(parked[0], "msg_id", None) == msg_id, "a field for the JSON log line too"
