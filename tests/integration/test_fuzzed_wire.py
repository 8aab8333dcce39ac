"""A fuzzed wire: garbage on every system topic never stops a worker, and nothing is lost.

Any Kafka client with write access can put anything on HALF, END, OP, SCHEDULE and a group's
``%CHECK%`` topic. Hypothesis draws what (derandomized, so CI runs the same cases each time):
random bytes, valid records cut short, a wrong schema fingerprint, a record of another type,
half-megabyte records, and valid records with values no RocketMQ broker would accept
(a system topic as the real topic, a decision or OP record in the wrong partition, offsets
past the end). Good transactions and delayed messages are sent between them. Then:

- the workers keep running;
- every bad HALF, END, OP and SCHEDULE record is parked in ``RMQ_SYS_POISON_TOPIC`` with its
  reason and its source (topic, partition, offset);
- a bad check request is skipped and counted by the producer, which goes on answering;
- each committed or delayed message arrives exactly once, and a rolled-back one never.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapter import naming
from adapter.client import Message, TransactionStatus
from adapter.config import KafkaSettings
from adapter.kafka import clients, topics
from adapter.transaction.config import CheckPolicy, CoordinatorConfig
from adapter.transaction.coordinator import TransactionCoordinator
from adapter.wire import codec
from adapter.wire.records import (
    CheckRequest,
    EndTransaction,
    HalfMessage,
    OpRecord,
    ScheduledMessage,
)
from tests.records import EXAMPLES
from tests.support import ON_A_BROKER, read_committed, running_workers, unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

HALF = naming.kafka_topic(naming.TRANS_HALF_TOPIC)
END = naming.kafka_topic(naming.TRANS_END_TOPIC)
OP = naming.kafka_topic(naming.TRANS_OP_TOPIC)
SCHEDULE = naming.kafka_topic(naming.SCHEDULE_TOPIC)
PARTITIONS = topics.DEFAULT_HALF_PARTITIONS
FAR = 10**12
"""An offset no partition reaches in a test."""

HUGE = 512 * 1024

FUZZ = settings(ON_A_BROKER, max_examples=2)

# -- valid records (tests/records.py), to cut, re-stamp and misuse -------------------------------


def garbage(record_type: type, *wrong_values: bytes) -> st.SearchStrategy[bytes]:
    """Values a reader of ``record_type`` must refuse: undecodable, foreign, or (``wrong_values``)
    decodable with values that can never be applied."""
    valid = codec.encode(EXAMPLES[record_type])
    foreign = [codec.encode(r) for t, r in EXAMPLES.items() if t is not record_type]
    return st.one_of(
        st.binary(max_size=48),
        st.integers(1, len(valid) - 1).map(lambda n: valid[:n]),
        st.binary(min_size=8, max_size=8).map(lambda f: codec.MARKER + f + valid[10:]),
        st.sampled_from(foreign),
        st.integers(HUGE, HUGE + 1024).map(lambda n: codec.MARKER + b"\x00" * n),
        *(st.just(v) for v in wrong_values),
    )


def wrong(record_type: type, **values: object) -> bytes:
    return codec.encode(replace(EXAMPLES[record_type], **values))


# Bad records go to partition 0 (level 1 for SCHEDULE); the wrong values are wrong there.
BAD = {
    HALF: garbage(
        HalfMessage,
        wrong(HalfMessage, topic=naming.SCHEDULE_TOPIC),
        wrong(HalfMessage, topic="not a topic"),
        wrong(HalfMessage, producer_group=""),
    ),
    END: garbage(
        EndTransaction,
        wrong(EndTransaction, half_partition=PARTITIONS + 1, half_offset=0),
        wrong(EndTransaction, half_partition=0, half_offset=FAR),  # its half never comes
    ),
    OP: garbage(
        OpRecord,
        wrong(OpRecord, half_partition=PARTITIONS + 1, half_offset=0),
        wrong(OpRecord, half_partition=0, half_offset=FAR),  # no such half message
        wrong(OpRecord, half_partition=0, half_offset=-1),
    ),
    SCHEDULE: garbage(
        ScheduledMessage,
        wrong(ScheduledMessage, topic=naming.TRANS_HALF_TOPIC),
        wrong(ScheduledMessage, topic="not a topic"),
        wrong(ScheduledMessage, topic=naming.POISON_TOPIC),
    ),
}
CHECK_GARBAGE = garbage(
    CheckRequest, wrong(CheckRequest, half_partition=999), wrong(CheckRequest, half_partition=-1)
)


def some(topic: str) -> st.SearchStrategy[list[bytes]]:
    return st.lists(BAD[topic], min_size=2, max_size=5)


# -- writing and reading ------------------------------------------------------------------------


class Writer:
    """A plain Kafka producer that remembers where each record landed."""

    def __init__(self, bootstrap: str) -> None:
        self._producer = clients.producer({"bootstrap.servers": bootstrap})
        self.landed: list[tuple[str, int, int]] = []

    def write(self, topic: str, values: list[bytes], partition: int = 0) -> None:
        def landed(error, record) -> None:  # type: ignore[no-untyped-def]
            assert error is None, error
            self.landed.append((record.topic(), record.partition(), record.offset()))

        for value in values:
            self._producer.produce(topic, value, partition=partition, on_delivery=landed)
        assert self._producer.flush(30) == 0


def parked_sources(bootstrap: str) -> dict[tuple[str, int, int], list[bytes]]:
    """Each parked record's source (topic, partition, offset) and the reasons it was parked."""
    sources: dict[tuple[str, int, int], list[bytes]] = {}
    for record in read_committed(bootstrap, naming.POISON_TOPIC, 0, timeout=3):
        h = dict(record.headers() or [])
        source = (h["source.topic"].decode(), int(h["source.partition"]), int(h["source.offset"]))
        sources.setdefault(source, []).append(h["reason"])
    return sources


def all_parked(bootstrap: str, expected: list[tuple[str, int, int]]):  # type: ignore[no-untyped-def]
    parked = parked_sources(bootstrap)
    return parked if all(source in parked for source in expected) else None


def alive(name: str) -> bool:
    return any(t.name == name and t.is_alive() for t in threading.enumerate())


def message(topic: str, body: str) -> Message:
    msg = Message(topic)
    msg.set_keys(body)
    msg.set_body(body)
    return msg


# -- the tests ----------------------------------------------------------------------------------


@FUZZ
@given(half=some(HALF), end=some(END), op=some(OP), checks=st.lists(CHECK_GARBAGE, max_size=4))
def test_garbage_on_the_transaction_topics_is_parked_and_every_transaction_settles_once(
    half: list[bytes],
    end: list[bytes],
    op: list[bytes],
    checks: list[bytes],
    system_topics: str,
    make_transaction_producer,
    new_topic,
    new_group,
) -> None:
    topic = new_topic(partitions=2)
    group = new_group("PG")
    producer = make_transaction_producer(group, lambda _msg: TransactionStatus.COMMIT)
    writer = Writer(system_topics)
    # OP is read back when a coordinator takes its partitions over: this garbage is met then.
    writer.write(OP, op)
    writer.write(naming.kafka_topic(naming.check_topic(group)), checks)

    policy = CheckPolicy(
        transaction_timeout_ms=1500, check_interval_ms=1000, check_max=3, end_wait_ms=2000
    )
    config = CoordinatorConfig(
        KafkaSettings(system_topics), policy=policy, worker_id=unique("fuzz"), max_wait_ms=200
    )
    with running_workers() as run:
        coordinator = run(TransactionCoordinator(config))
        outcomes = {
            "commit": TransactionStatus.COMMIT,
            "rollback": TransactionStatus.ROLLBACK,
            "unknown": TransactionStatus.UNKNOWN,  # settled by the check-back: COMMIT
        }
        sent = []
        for i in range(max(len(half), len(end))):
            writer.write(HALF, half[i : i + 1])
            for outcome, status in outcomes.items():
                body = f"{outcome}-{i}"
                producer.send_message_in_transaction(message(topic, body), lambda *_a, s=status: s)
                sent.append(body)
            writer.write(END, end[i : i + 1])

        expected = [body for body in sent if not body.startswith("rollback")]
        records = read_committed(system_topics, topic, len(expected))
        assert Counter(r.value().decode() for r in records) == Counter(expected)
        bad = [w for w in writer.landed if w[0] in (HALF, END, OP)]
        parked = wait_until(
            lambda: all_parked(system_topics, bad), timeout=60, what="every bad record parked"
        )
        assert all(parked[source][0] for source in bad), "each parked with a reason"
        assert producer._checks is not None
        assert producer._checks.unreadable == len(checks), "each bad check request counted"
        assert alive(coordinator.name), "the coordinator kept running"


@pytest.fixture
def forwarder(start_forwarder):  # type: ignore[no-untyped-def]
    """One forwarder for all of a test's examples (a function fixture is set up once)."""
    return start_forwarder()


@FUZZ
@given(bad=some(SCHEDULE))
def test_garbage_on_the_schedule_topic_is_parked_and_every_delayed_message_arrives_once(
    bad: list[bytes], system_topics: str, forwarder, make_producer, new_topic
) -> None:
    topic = new_topic(partitions=2)
    producer = make_producer()
    writer = Writer(system_topics)
    bodies = []
    for i, value in enumerate(bad):
        writer.write(SCHEDULE, [value], partition=0)
        msg = message(topic, f"delayed-{i}")
        msg.set_delay_time_level(1)
        producer.send_sync(msg)
        bodies.append(f"delayed-{i}")

    records = read_committed(system_topics, topic, len(bodies))
    assert Counter(r.value().decode() for r in records) == Counter(bodies)
    parked = wait_until(
        lambda: all_parked(system_topics, writer.landed), timeout=60, what="every bad record parked"
    )
    assert all(parked[source][0] for source in writer.landed), "each parked with a reason"
    assert alive(forwarder.name), "the forwarder kept running"
