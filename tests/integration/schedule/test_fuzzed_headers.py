"""Any application that may write SCHEDULE_TOPIC_XXXX can write any headers there: null, foreign,
repeated or malformed timer headers on every partition park those records and nothing else;
no forwarder dies, and the good records behind them are delivered once."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapter import naming
from adapter import properties as prop
from adapter.clock import ManualClock
from adapter.config import KafkaSettings
from adapter.delay import DelayLevels
from adapter.hops import HopTable
from adapter.kafka import clients
from adapter.message import Message
from adapter.schedule import timer
from adapter.schedule.config import ForwarderConfig
from adapter.schedule.envelope import scheduled
from adapter.schedule.forwarder import ScheduleForwarder
from adapter.schedule.plan import hop_headers
from adapter.wire import codec
from tests.support import ON_A_BROKER, create_topic, read_committed, running_workers, unique

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

SCHEDULE = naming.kafka_topic(naming.SCHEDULE_TOPIC)
HOPS = HopTable.of(DelayLevels.parse())
HOURS_3 = 3 * 3_600_000
"""Past the longest level (2 h): every record written so far is due."""

NULLS: list[list[tuple[str, bytes | None]]] = [
    [(timer.DELIVER_HEADER, None)],
    [(timer.DELIVER_HEADER, b"1"), (timer.HOP_DUE_HEADER, None), (prop.UNIQ_KEY, b"T")],
    [(timer.DELIVER_HEADER, b"1"), (timer.HOP_DUE_HEADER, b"1"), (prop.UNIQ_KEY, None)],
]
"""The headers that crashed every forwarder, on every partition of every example."""
NAMES = [timer.DELIVER_HEADER, timer.HOP_DUE_HEADER, prop.UNIQ_KEY, prop.DELAY, "foreign"]


def envelope(topic: str, body: str) -> bytes:
    message = Message(topic)
    message.set_body(body)
    return codec.encode(scheduled(message, level=1, unique_key=unique("ID"), born_ms=0))


def header_values(now_ms: int) -> st.SearchStrategy[bytes | None]:
    """Null, any bytes, any number, or a time within an hour of now."""
    near = st.integers(min_value=now_ms - 3_600_000, max_value=now_ms + 3_600_000)
    numbers = st.one_of(st.integers(min_value=-(2**70), max_value=2**70), near)
    return st.one_of(st.none(), st.binary(max_size=12), numbers.map(lambda n: str(n).encode()))


@pytest.fixture(scope="module")
def forwarders(clock_kafka: str) -> Any:
    """Two forwarders on threads, on one manual clock (records move only once it says)."""
    clock = ManualClock()
    with running_workers() as run:
        workers = [
            run(
                ScheduleForwarder(
                    ForwarderConfig(
                        KafkaSettings(clock_kafka),
                        worker_id=unique("fuzz"),
                        max_wait_ms=100,
                        prepare_ahead_ms=0,
                    ),
                    clock=clock,
                )
            )
            for _ in range(2)
        ]
        yield clock, workers


@given(data=st.data())
@ON_A_BROKER
def test_fuzzed_headers_on_every_partition_park_only_their_records(
    clock_kafka: str, forwarders: Any, data: st.DataObject
) -> None:
    clock, workers = forwarders
    good, sink = create_topic(clock_kafka, 1, "Good"), create_topic(clock_kafka, 1, "Sink")
    names = st.sampled_from(NAMES)
    headers = st.lists(st.tuples(names, header_values(clock.now_ms())), max_size=5)
    producer = clients.producer({"bootstrap.servers": clock_kafka})
    for partition in range(HOPS.partitions):
        fuzzed = NULLS + data.draw(st.lists(headers, min_size=1, max_size=3))
        for i, record_headers in enumerate(fuzzed):
            value = data.draw(st.sampled_from([b"\x00garbage", envelope(sink, f"f{i}")]))
            producer.produce(SCHEDULE, value, partition=partition, headers=record_headers)
    bodies = []
    for partition in range(HOPS.partitions):  # a good record behind the bad ones, everywhere
        body = f"good-{partition}"
        is_level = HOPS.level_of(partition) is not None
        record_headers = (
            [] if is_level else hop_headers(unique("T"), clock.now_ms() + 1_000, clock.now_ms())
        )
        producer.produce(
            SCHEDULE, envelope(good, body), partition=partition, headers=record_headers
        )
        bodies.append(body)
    assert producer.flush(30) == 0

    clock.advance(HOURS_3)
    records = read_committed(clock_kafka, good, len(bodies), timeout=90)
    counts = Counter(r.value().decode() for r in records)
    assert sorted(counts) == sorted(bodies), "every good record delivered"
    assert all(count == 1 for count in counts.values()), f"each once: {counts}"
    assert all(not w.stopping and w.alive(within_s=1.0) for w in workers), "both alive"
