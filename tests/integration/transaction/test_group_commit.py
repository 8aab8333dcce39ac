"""The fast path against a real broker: a transactional producer commits its decisions in its
own Kafka transactions, the coordinator only records them, and a group that cannot commit, or a
producer killed mid-group, still ends with every committed message delivered exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition

from adapter import naming
from adapter import properties as prop
from adapter.client import Message, TransactionMQProducer, TransactionStatus
from adapter.clock import ManualClock
from adapter.kafka import clients
from adapter.transaction.envelope import DELIVERED_HEADER
from adapter.transaction.group_commit import MIN_TIME_LEFT_MS, GroupTimes
from adapter.transaction.timing import FAST_COMMIT_WINDOW_MS
from tests.support import DIRECT_COMMIT_2S, metric, read_committed, unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

END = naming.kafka_topic(naming.TRANS_END_TOPIC)


def order(topic: str, body: str) -> Message:
    message = Message(topic)
    message.set_body(body)
    message.set_keys(body)
    return message


def commit(_msg: object, _args: object = None) -> TransactionStatus:
    return TransactionStatus.COMMIT


def fast_producer(make_transaction_producer, new_group):  # type: ignore[no-untyped-def]
    """A transactional producer of a new group, and its group committer."""
    producer = make_transaction_producer(new_group("PG"), commit)
    assert producer.fast_path is not None
    return producer, producer.fast_path


def header(record, name: str) -> bytes | None:  # type: ignore[no-untyped-def]
    return next((v for k, v in record.headers() or () if k == name), None)


def test_a_commit_is_visible_without_the_coordinator_and_recorded_by_it_once(
    system_topics, start_coordinator, make_transaction_producer, new_topic, new_group
) -> None:
    topic = new_topic(partitions=2)
    group = new_group("PG")
    producer = make_transaction_producer(group, commit)
    committer = producer.fast_path
    assert committer is not None
    # A first transaction warms up Kafka's transaction coordinator (slow on a new broker).
    producer.send_message_in_transaction(order(topic, "warm-up"), commit)
    wait_until(lambda: committer.committed + committer.fell_back, timeout=60, what="warm-up")
    committed_before, fell_back_before = committer.committed, committer.fell_back
    sent = [f"fast-{i}" for i in range(50)]
    for body in sent:
        producer.send_message_in_transaction(order(topic, body), commit)
    wait_until(
        lambda: (
            committer.committed + committer.fell_back
            == committed_before + fell_back_before + len(sent)
        ),
        timeout=30,
        what="every group settled",
    )
    fast = committer.committed - committed_before
    assert fast > 0, "the fast path was taken"
    # No coordinator runs yet: the producer's own transactions made these visible. (A group
    # that missed its window on a busy machine waits for the coordinator, below.)
    records = [r for r in read_committed(system_topics, topic, fast) if r.value() != b"warm-up"]
    assert len(records) == fast
    assert len({r.value() for r in records}) == fast, "none twice"
    assert all(header(r, prop.TRANSACTION_ID) == header(r, prop.UNIQ_KEY) for r in records)
    sent.append("warm-up")

    coordinator = start_coordinator(transaction_timeout_ms=1500, check_interval_ms=1000)
    wait_until(
        lambda: metric(coordinator, "rmq_transactions_commits_total") >= len(sent),
        timeout=60,
        what="the coordinator recording every commit",
    )
    assert [p for _, p in coordinator.pending() if p.info.producer_group == group] == []
    again = read_committed(system_topics, topic, len(sent))  # warm-up included
    assert Counter(r.value().decode() for r in again) == Counter(sent), "recorded, not re-sent"


def test_flush_returns_once_every_decision_is_committed_or_handed_back(
    system_topics, make_transaction_producer, new_topic, new_group
) -> None:
    topic = new_topic(partitions=1)
    producer, committer = fast_producer(make_transaction_producer, new_group)
    for i in range(20):
        producer.send_message_in_transaction(order(topic, f"m{i}"), commit)

    assert producer.flush(30) == 0

    assert committer.committed + committer.fell_back == 20, "nothing left in an open group"


def test_an_observer_learns_when_each_group_s_steps_happened_in_their_order(
    system_topics, make_transaction_producer, new_topic, new_group
) -> None:
    topic = new_topic(partitions=1)
    producer, committer = fast_producer(make_transaction_producer, new_group)
    groups: list[GroupTimes] = []
    committer.observe = groups.append
    sent = {
        producer.send_message_in_transaction(order(topic, f"m{i}"), commit).msg_id
        for i in range(10)
    }
    assert producer.flush(30) == 0

    assert {i for g in groups for i in g.message_ids} == sent, "every decision, once"
    # Whether a group committed or, on a loaded machine, fell back to the coordinator (its
    # records acknowledged past the fast-commit window: the test after this one), its steps
    # are observed in their order.
    for group in groups:
        assert len(group.handed) == len(group.message_ids)
        for began, produced in group.handed:
            assert began <= produced <= group.taken <= group.flushed <= group.committed


def test_a_group_that_turns_late_before_it_commits_is_aborted_and_delivered_once(
    system_topics, start_coordinator, new_topic, new_group
) -> None:
    start_coordinator(transaction_timeout_ms=1500, check_interval_ms=1000)
    topic = new_topic(partitions=1)
    clock = ManualClock()
    producer = TransactionMQProducer(new_group("PG"), commit, clock=clock)
    producer.set_name_server_address(system_topics)
    producer.start()
    try:
        committer = producer.fast_path
        assert committer is not None
        wait_until(lambda: committer.ready, timeout=30, what="the fast path ready")
        committer.linger_s = 1.0  # the group stays open while the clock moves on

        def near_the_windows_end(_msg: object, _args: object) -> TransactionStatus:
            clock.advance(FAST_COMMIT_WINDOW_MS - MIN_TIME_LEFT_MS - 50)
            return TransactionStatus.COMMIT

        producer.send_message_in_transaction(order(topic, "late"), near_the_windows_end)
        assert committer.too_late == 0, "taken: it had time left"
        clock.advance(MIN_TIME_LEFT_MS + 100)  # the group's flush ends past the window
        wait_until(lambda: committer.fell_back == 1, timeout=30, what="the group aborted")
        records = read_committed(system_topics, topic, 1)
    finally:
        producer.shutdown()
    assert [r.value() for r in records] == [b"late"]
    assert committer.committed == 0


def test_a_slow_local_transaction_goes_to_the_coordinator_alone_and_its_group_commits(
    system_topics, start_coordinator, make_transaction_producer, new_topic, new_group
) -> None:
    start_coordinator(transaction_timeout_ms=1500, check_interval_ms=1000)
    topic = new_topic(partitions=1)
    producer, committer = fast_producer(make_transaction_producer, new_group)
    producer.send_message_in_transaction(order(topic, "warm-up"), commit)
    assert producer.flush(60) == 0
    stop = threading.Event()
    sent: list[str] = ["warm-up", "slow"]

    def send_fast(lane: int) -> None:
        for n in range(1000):
            if stop.is_set():
                return
            body = f"fast-{lane}-{n}"
            producer.send_message_in_transaction(order(topic, body), commit)
            sent.append(body)

    def slow_local_transaction(_msg: object, _args: object) -> TransactionStatus:
        stop.wait(FAST_COMMIT_WINDOW_MS / 1000 + 0.2)  # longer than the window
        return TransactionStatus.COMMIT

    senders = [threading.Thread(target=send_fast, args=(i,)) for i in range(3)]
    for thread in senders:
        thread.start()
    try:
        producer.send_message_in_transaction(order(topic, "slow"), slow_local_transaction)
    finally:
        stop.set()
        for thread in senders:
            thread.join(30)
    assert producer.flush(30) == 0
    records = read_committed(system_topics, topic, len(sent), timeout=60)
    # The slow decision is refused at submit (too late for any group), so it never joins one:
    # before the fix it joined a group and took it down with it (a group of 8 fell back). A
    # fast decision a loaded machine stalls past its window still falls back, by design (the
    # safety valve), so fell_back is not asserted here: this test cannot stop the machine.
    assert committer.too_late == 1, "the slow decision went to the coordinator alone"
    assert Counter(r.value().decode() for r in records) == Counter(sent)


@pytest.mark.parametrize(
    "configs",
    [{}, DIRECT_COMMIT_2S],
    ids=["group-commit", "direct-commit"],
)
def test_a_producer_killed_mid_group_loses_nothing_and_delivers_nothing_twice(
    system_topics,
    start_coordinator,
    make_transaction_producer,
    new_topic,
    new_group,
    tmp_path,
    configs: dict[str, str],
) -> None:
    """The same on a topic made for direct commits: appends and ENDs cut off at any point."""
    start_coordinator(transaction_timeout_ms=1500, check_interval_ms=1000, check_max=30)
    topic = new_topic(partitions=2, **configs)
    group = new_group("PG")
    database = tmp_path / "committed.txt"
    child = subprocess.Popen(
        [sys.executable, "-c", _sender_script(system_topics, group, topic, database)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_until(
            lambda: len(_committed_ids(database)) >= 150,
            timeout=90,
            what="local transactions committing",
        )
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.kill()
        _, err = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL, err.decode()[-2000:]

    committed = _committed_ids(database)
    survivor_lock = threading.Lock()

    def checker(msg) -> TransactionStatus:  # type: ignore[no-untyped-def]
        with survivor_lock:  # the database, read as the check comes
            known = _committed_ids(database)
        return TransactionStatus.COMMIT if msg.id in known else TransactionStatus.ROLLBACK

    make_transaction_producer(group, checker)
    records = read_committed(system_topics, topic, len(committed), timeout=120)
    delivered = Counter((header(r, prop.UNIQ_KEY) or b"").decode() for r in records)
    print(
        f"killed the sender after {len(committed)} local commits; "
        f"{len(delivered)} delivered, {sum(delivered.values())} records"
    )
    assert set(delivered) - committed == set(), "nothing the database did not commit"
    assert committed - set(delivered) == set(), "no committed message lost"
    assert [t for t, n in delivered.items() if n > 1] == [], "no message twice"


def _committed_ids(database: Path) -> set[str]:
    if not database.exists():
        return set()
    return {line for line in database.read_text().splitlines() if len(line) == 32}


def _sender_script(bootstrap: str, group: str, topic: str, database: Path) -> str:
    """Four threads send transactional messages for ever; a local transaction commits by
    writing its transaction id to ``database`` before it returns COMMIT."""
    return textwrap.dedent(
        f"""
        import threading
        from adapter.client import Message, TransactionMQProducer, TransactionStatus
        producer = TransactionMQProducer({group!r}, lambda msg: TransactionStatus.UNKNOWN)
        producer.set_name_server_address({bootstrap!r})
        producer.start()
        lock = threading.Lock()
        database = open({str(database)!r}, "a", buffering=1)

        def local(msg, args):
            with lock:
                database.write(msg.id + "\\n")
            return TransactionStatus.COMMIT

        def send(worker):
            for i in range(100000):
                msg = Message({topic!r})
                msg.set_body(f"{{worker}}-{{i}}")
                producer.send_message_in_transaction(msg, local)

        threads = [threading.Thread(target=send, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        """
    )


def test_the_end_of_a_fast_commit_is_marked_delivered(
    system_topics, make_transaction_producer, new_topic, new_group
) -> None:
    topic = new_topic(partitions=1)
    producer, committer = fast_producer(make_transaction_producer, new_group)
    # A new broker's first transactions can miss the window and go the plain way: send until
    # one is committed on the fast path, and look for that one's END.
    for _ in range(5):
        before = committer.committed, committer.fell_back
        result = producer.send_message_in_transaction(order(topic, "marked"), commit)
        wait_until(
            lambda b=before: (committer.committed, committer.fell_back) != b,
            timeout=30,
            what="the decision settled",
        )
        if committer.committed > before[0]:
            break
    reader = clients.consumer(
        {
            "bootstrap.servers": system_topics,
            "group.id": unique("end-reader"),
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    ends: list[Any] = []
    try:
        partitions = reader.list_topics(END, timeout=10).topics[END].partitions
        reader.assign([TopicPartition(END, p, 0) for p in partitions])

        def read_ours() -> bool:
            for record in reader.consume(500, 0.2):
                if record.error() is None and result.msg_id.encode() in (record.value() or b""):
                    ends.append(record)
            return bool(ends)

        wait_until(read_ours, timeout=60, what="the END record of the fast commit")
    finally:
        reader.close()
    assert [header(r, DELIVERED_HEADER) for r in ends] == [b"1"]
