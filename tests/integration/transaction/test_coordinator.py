"""Transactional messages end to end: producer, coordinator, check-back, crashes, admin."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
import zlib
from collections import Counter

import pytest
from click.testing import CliRunner
from confluent_kafka import TopicPartition

from adapter import naming
from adapter import properties as prop
from adapter.client import Message, TransactionMQProducer, TransactionStatus
from adapter.clock import ManualClock
from adapter.config import KafkaSettings
from adapter.exceptions import AdapterError
from adapter.kafka import clients
from adapter.msgid import new_message_id
from adapter.ops import broker as local_broker
from adapter.ops.cli import main as cli
from adapter.transaction import admin
from adapter.transaction.config import CheckPolicy, CoordinatorConfig
from adapter.transaction.coordinator import TransactionCoordinator
from adapter.wire import codec
from adapter.wire.records import EndTransaction, TransactionDecision
from tests.support import DIRECT_COMMIT_2S, create_topic, metric, read_committed, unique, wait_until
from tests.workers import start_worker, worker_kinds

pytestmark = pytest.mark.timeout(240)

# Small timeouts: the first check 1.5 s after birth, then one a second, three at most.
FAST = {"transaction_timeout_ms": 1500, "check_interval_ms": 1000, "check_max": 3}
END = naming.kafka_topic(naming.TRANS_END_TOPIC)
POISON = naming.kafka_topic(naming.POISON_TOPIC)


def message(topic: str, body: str, keys: str = "order-1", tags: str = "paid") -> Message:
    msg = Message(topic)
    msg.set_keys(keys)
    msg.set_tags(tags)
    msg.set_property("shop", "north")
    msg.set_body(body)
    return msg


class answers:
    """A local transaction or checker that records the messages it saw and answers ``status``
    (which a test may change, as when an application is fixed)."""

    def __init__(self, status: TransactionStatus | None) -> None:
        self.status = status
        self.seen: list = []

    def __call__(self, msg, *_args):
        self.seen.append(msg)
        return self.status


def pending_rows(bootstrap: str, transaction_id: str) -> list[admin.Row]:
    """What `transactions list` shows of one transaction."""
    rows = admin.pending(KafkaSettings(bootstrap))
    return [r for r in rows if r.transaction_id == transaction_id]


def discarded_rows(bootstrap: str, transaction_id: str) -> list[admin.Row]:
    """What `transactions list --discarded` shows of one transaction."""
    rows = admin.discarded(KafkaSettings(bootstrap))
    return [r for r in rows if r.transaction_id == transaction_id]


def bodies(records: list) -> Counter:
    return Counter(r.value().decode() for r in records)


def headers(record) -> dict[str, bytes]:
    return dict(record.headers() or [])


def test_a_committed_message_reaches_its_topic_once_with_its_properties(
    system_topics, start_coordinator, make_transaction_producer, new_topic, new_group
) -> None:
    # No check within 10 s, so that a slow machine cannot check before the commit is read.
    coordinator = start_coordinator(transaction_timeout_ms=10_000, check_interval_ms=10_000)
    topic = new_topic(partitions=2)
    producer = make_transaction_producer(new_group("PG"), answers(TransactionStatus.UNKNOWN))

    result = producer.send_message_in_transaction(
        message(topic, "paid"), answers(TransactionStatus.COMMIT)
    )

    [record] = read_committed(system_topics, topic, 1)
    assert record.value() == b"paid"
    props = headers(record)
    assert props[prop.UNIQ_KEY].decode() == result.msg_id
    assert props[prop.TRANSACTION_ID].decode() == result.msg_id
    assert (props[prop.KEYS], props[prop.TAGS], props["shop"]) == (b"order-1", b"paid", b"north")
    assert prop.TRANSACTION_CHECK_TIMES not in props, "committed without a check"
    # the producer's group commit made it visible; the coordinator records it when it reads it
    wait_until(
        lambda: metric(coordinator, "rmq_transactions_commits_total") >= 1,
        timeout=30,
        what="the record",
    )


def test_a_rolled_back_message_is_never_visible(
    system_topics, start_coordinator, make_transaction_producer, new_topic, new_group
) -> None:
    start_coordinator(**FAST)
    topic = new_topic(partitions=1)
    producer = make_transaction_producer(new_group("PG"), answers(TransactionStatus.UNKNOWN))

    producer.send_message_in_transaction(
        message(topic, "cancelled"), answers(TransactionStatus.ROLLBACK)
    )
    producer.send_message_in_transaction(
        message(topic, "marker"), answers(TransactionStatus.COMMIT)
    )

    assert bodies(read_committed(system_topics, topic, 1)) == Counter({"marker": 1})


@pytest.mark.parametrize(
    ("answer", "expected"),
    [(TransactionStatus.COMMIT, {"pending", "marker"}), (TransactionStatus.ROLLBACK, {"marker"})],
)
def test_an_unknown_outcome_is_settled_by_the_check_back(
    answer,
    expected,
    system_topics,
    start_coordinator,
    make_transaction_producer,
    new_topic,
    new_group,
) -> None:
    start_coordinator(**FAST)
    topic = new_topic(partitions=1)
    checker = answers(answer)
    producer = make_transaction_producer(new_group("PG"), checker)

    sent = producer.send_message_in_transaction(message(topic, "pending"), answers(None))
    wait_until(lambda: checker.seen, timeout=30, what="the check-back")
    producer.send_message_in_transaction(
        message(topic, "marker"), answers(TransactionStatus.COMMIT)
    )

    records = read_committed(system_topics, topic, len(expected))
    assert set(bodies(records)) == expected
    assert max(bodies(records).values()) == 1
    [checked, *_] = checker.seen
    assert checked.id == sent.msg_id
    assert (checked.topic, checked.keys, checked.tags, checked.body) == (
        topic,
        b"order-1",
        b"paid",
        b"pending",
    )
    assert checked.get_property("shop") == b"north"
    assert checked.get_property(prop.TRANSACTION_CHECK_TIMES) == b"1"
    if answer == TransactionStatus.COMMIT:
        [delivered] = [r for r in records if r.value() == b"pending"]
        assert headers(delivered)[prop.TRANSACTION_CHECK_TIMES] == b"1"


def test_the_first_check_comes_no_earlier_than_the_transaction_timeout(
    system_topics, start_coordinator, make_transaction_producer, new_topic, new_group
) -> None:
    start_coordinator(**FAST)
    topic = new_topic(partitions=1)
    checked_at: list[float] = []

    def checker(msg):
        checked_at.append(time.time())
        return TransactionStatus.COMMIT

    producer = make_transaction_producer(new_group("PG"), checker)
    local_done: list[float] = []

    def local(msg, _args):
        local_done.append(time.time())
        return TransactionStatus.UNKNOWN

    producer.send_message_in_transaction(message(topic, "late"), local)
    [record] = read_committed(system_topics, topic, 1)
    born_ms = int(headers(record)[prop.BORN_TIMESTAMP])
    assert len(checked_at) == 1, "one check settles it"
    assert local_done[0] <= checked_at[0], "the check comes after the local transaction"
    assert checked_at[0] * 1000 >= born_ms + FAST["transaction_timeout_ms"]


def test_a_message_never_decided_is_parked_after_check_max_checks_and_can_be_resumed(
    system_topics, start_coordinator, make_transaction_producer, new_topic, new_group
) -> None:
    coordinator = start_coordinator(**FAST)
    topic = new_topic(partitions=1)
    checker = answers(TransactionStatus.UNKNOWN)
    producer = make_transaction_producer(new_group("PG"), checker)

    sent = producer.send_message_in_transaction(message(topic, "undecided"), answers(None))
    [row] = wait_until(
        lambda: discarded_rows(system_topics, sent.msg_id), timeout=60, what="the discard"
    )
    assert len(checker.seen) == FAST["check_max"], "exactly check-max checks before the discard"
    assert [m.get_property(prop.TRANSACTION_CHECK_TIMES) for m in checker.seen] == [
        b"1",
        b"2",
        b"3",
    ]
    assert "checked 3 times" in (row.reason or "")
    wait_until(
        lambda: metric(coordinator, "rmq_transactions_discards_total") >= 1,
        timeout=10,
        what="count",
    )
    listed = CliRunner().invoke(
        cli, ["transactions", "list", "--discarded", "--bootstrap", system_topics]
    )
    assert sent.msg_id in listed.output

    # An operator resumes it; this time the producer knows the answer.
    checker.seen.clear()
    checker.status = TransactionStatus.COMMIT  # the application was fixed meanwhile
    resumed = CliRunner().invoke(
        cli, ["transactions", "resume", "--bootstrap", system_topics, sent.msg_id]
    )
    assert resumed.exit_code == 0, resumed.output
    [record] = read_committed(system_topics, topic, 1)
    assert record.value() == b"undecided"
    assert headers(record)[prop.UNIQ_KEY].decode() == sent.msg_id


def test_a_message_resumed_onto_the_half_partition_of_its_discarded_copy_is_checked_again(
    system_topics, start_coordinator, make_transaction_producer, new_topic, new_group
) -> None:
    start_coordinator(**FAST)
    topic = new_topic(partitions=1)
    checker = answers(TransactionStatus.UNKNOWN)
    producer = make_transaction_producer(new_group("PG"), checker)
    # The resume writes with the transaction id as its key (librdkafka: CRC-32 of the key);
    # pick an id that lands it on the partition where this producer wrote the first copy.
    probe = producer.send_half(message(topic, "probe"))
    producer.end_half(probe, TransactionDecision.ROLLBACK)
    halves = half_partition_count(system_topics)
    tid = next(
        t for t in iter(new_message_id, None) if zlib.crc32(t.encode()) % halves == probe.partition
    )
    sent = producer.send_half(message(topic, "undecided"), transaction_id=tid)
    wait_until(lambda: discarded_rows(system_topics, tid), timeout=60, what="the discard")

    checker.seen.clear()
    checker.status = TransactionStatus.COMMIT
    resumed = admin.resume(KafkaSettings(system_topics), tid)
    assert resumed.partition == sent.partition, "the resumed copy shares the first's partition"
    [record] = read_committed(system_topics, topic, 1)
    assert record.value() == b"undecided"
    assert [m.get_property(prop.TRANSACTION_CHECK_TIMES) for m in checker.seen] == [b"1"]


def half_partition_count(bootstrap: str) -> int:
    metadata = clients.admin({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return len(metadata.topics[naming.kafka_topic(naming.TRANS_HALF_TOPIC)].partitions)


def test_pending_messages_are_listed_with_their_age_and_check_count(
    system_topics, start_coordinator, make_transaction_producer, new_topic, new_group
) -> None:
    start_coordinator(transaction_timeout_ms=500, check_interval_ms=60_000)
    topic = new_topic(partitions=1)
    group = new_group("PG")
    checker = answers(TransactionStatus.UNKNOWN)
    producer = make_transaction_producer(group, checker)

    sent = producer.send_message_in_transaction(message(topic, "open"), answers(None))
    wait_until(lambda: checker.seen, timeout=30, what="the first check")

    [row] = wait_until(
        lambda: pending_rows(system_topics, sent.msg_id),
        timeout=30,
        what="the pending message in the list",
    )
    assert (row.producer_group, row.topic, row.check_times) == (group, topic, 1)
    output = CliRunner().invoke(cli, ["transactions", "list", "--bootstrap", system_topics]).output
    assert sent.msg_id in output
    assert group in output


def test_a_producer_that_dies_after_its_half_write_is_settled_by_another_of_its_group(
    system_topics, start_coordinator, make_transaction_producer, new_topic, new_group
) -> None:
    # Checks every 2 s, 15 at most: the dead producer holds the group's check queue until its
    # session times out, and the survivor answers after that.
    start_coordinator(transaction_timeout_ms=1500, check_interval_ms=2000)
    topic = new_topic(partitions=1)
    group = new_group("PG")
    script = textwrap.dedent(
        f"""
        import os, signal
        from adapter.client import Message, TransactionMQProducer, TransactionStatus
        producer = TransactionMQProducer({group!r}, lambda msg: TransactionStatus.UNKNOWN)
        producer.set_name_server_address({system_topics!r})
        producer.start()
        msg = Message({topic!r})
        msg.set_body("orphan")
        def die(msg, args):
            print("half written", msg.id, flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        producer.send_message_in_transaction(msg, die)
        """
    )
    dying = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert dying.returncode == -9, dying.stderr
    orphan_id = dying.stdout.split()[-1]

    survivor = answers(TransactionStatus.COMMIT)
    make_transaction_producer(group, survivor)
    [record] = read_committed(system_topics, topic, 1, timeout=90)
    assert record.value() == b"orphan"
    assert [m.id for m in survivor.seen][:1] == [orphan_id]


def test_a_late_commit_racing_a_check_answer_yields_one_copy(
    system_topics, start_coordinator, make_transaction_producer, new_topic, new_group
) -> None:
    coordinator = start_coordinator(**FAST)
    topic = new_topic(partitions=1)
    checker = answers(TransactionStatus.COMMIT)
    producer = make_transaction_producer(new_group("PG"), checker)

    def slow_commit(msg, _args):
        wait_until(lambda: checker.seen, timeout=30, what="the check while the commit is slow")
        return TransactionStatus.COMMIT

    producer.send_message_in_transaction(message(topic, "once"), slow_commit)
    records = read_committed(system_topics, topic, 1)
    assert bodies(records) == Counter({"once": 1})
    wait_until(
        lambda: metric(coordinator, "rmq_transactions_duplicates_total") >= 1,
        timeout=30,
        what="the second decision counted as a duplicate",
    )


def test_a_half_message_written_twice_by_one_send_is_delivered_once_and_never_checked(
    system_topics, start_coordinator, make_transaction_producer, new_topic, new_group
) -> None:
    coordinator = start_coordinator(**FAST)
    topic = new_topic(partitions=1)
    checker = answers(TransactionStatus.COMMIT)
    # A send retried after a leader change can store its half message twice, with the same
    # born time: Kafka's idempotence does not hold across the producer's epoch bump. The ack
    # names one copy. A clock that stands still gives the second write the same born time.
    producer = make_transaction_producer(new_group("PG"), checker, clock=ManualClock())
    first = producer.send_half(message(topic, "paid twice"))
    again = producer.send_half(message(topic, "paid twice"), transaction_id=first.transaction_id)
    assert again.offset == first.offset + 1
    producer.end_half(again, TransactionDecision.COMMIT)
    wait_until(
        lambda: metric(coordinator, "rmq_transactions_commits_total") >= 1,
        timeout=30,
        what="commit",
    )
    time.sleep(FAST["transaction_timeout_ms"] / 1000 + 2)  # the first copy's check was due

    assert checker.seen == [], "neither copy was checked"
    assert bodies(read_committed(system_topics, topic, 1)) == Counter({"paid twice": 1})


def test_half_messages_the_consumer_delivers_again_are_not_checked_or_delivered_again(
    system_topics, make_transaction_producer, new_topic, new_group, caplog
) -> None:
    coordinator = TransactionCoordinator(
        CoordinatorConfig(
            KafkaSettings(system_topics),
            policy=CheckPolicy(**FAST),
            worker_id=unique("test"),
            max_wait_ms=100,
        )
    )
    topic = new_topic(partitions=1)
    checker = answers(TransactionStatus.COMMIT)
    producer = make_transaction_producer(new_group("PG"), checker)
    try:
        for i in range(3):
            producer.send_message_in_transaction(
                message(topic, f"paid-{i}"), answers(TransactionStatus.COMMIT)
            )
        producer.send_message_in_transaction(message(topic, "checked"), answers(None))

        def four_commits() -> bool:
            coordinator.drain()
            return metric(coordinator, "rmq_transactions_commits_total") >= 4

        wait_until(four_commits, timeout=60, what="four commits, one of them after the check-back")
        # A consumer whose position goes back (as after a leader change) delivers HALF and
        # END again: were the half messages pending again, each would be checked and
        # delivered again.
        consumer = coordinator.consumer()
        for tp in consumer.assignment():
            consumer.seek(TopicPartition(tp.topic, tp.partition, 0))
        deadline = time.monotonic() + 5  # checks and their answers would be through by then
        while time.monotonic() < deadline:
            coordinator.run_once()
    finally:
        coordinator.close()
    assert len(checker.seen) == 1, "no half message was checked again"
    counts = bodies(read_committed(system_topics, topic, 4))
    assert counts == Counter({"paid-0": 1, "paid-1": 1, "paid-2": 1, "checked": 1})
    assert "again, from offset 0" in caplog.text, "the records read again were noticed"


def test_a_corrupt_end_record_is_parked_and_the_coordinator_goes_on(
    system_topics, start_coordinator, make_transaction_producer, new_topic, new_group
) -> None:
    coordinator = start_coordinator(**FAST)
    raw = clients.producer({"bootstrap.servers": system_topics})
    marker = unique("corrupt").encode()
    raw.produce(END, b"\xc3\x01not avro " + marker, partition=0)
    assert raw.flush(10) == 0

    def parked():
        return [
            r
            for r in read_committed(system_topics, naming.POISON_TOPIC, 0, timeout=3)
            if marker in r.value()
        ]

    [record] = wait_until(parked, timeout=60, what="the corrupt END in the poison topic")
    assert headers(record)["source.topic"] == END.encode()
    assert headers(record)["reason"].startswith(b"corrupt")
    wait_until(
        lambda: metric(coordinator, "rmq_transactions_parked_total") >= 1, timeout=10, what="count"
    )

    topic = new_topic(partitions=1)
    producer = make_transaction_producer(new_group("PG"), answers(TransactionStatus.UNKNOWN))
    producer.send_message_in_transaction(message(topic, "after"), answers(TransactionStatus.COMMIT))
    assert bodies(read_committed(system_topics, topic, 1)) == Counter({"after": 1})


def test_a_decision_naming_the_wrong_transaction_is_refused_and_parked_with_the_reason(
    system_topics, start_coordinator, make_transaction_producer, new_topic, new_group
) -> None:
    coordinator = start_coordinator(transaction_timeout_ms=60_000, check_interval_ms=60_000)
    topic = new_topic(partitions=1)
    group = new_group("PG")
    producer = make_transaction_producer(group, answers(TransactionStatus.UNKNOWN))
    sent = producer.send_message_in_transaction(message(topic, "guarded"), answers(None))
    [row] = wait_until(
        lambda: pending_rows(system_topics, sent.msg_id),
        timeout=30,
        what="the pending half message",
    )
    forged = EndTransaction(
        transaction_id="not-" + sent.msg_id,
        producer_group=group,
        half_partition=row.partition,
        half_offset=row.offset,
        decision=TransactionDecision.COMMIT,
        from_check=False,
        timestamp=0,
    )
    raw = clients.producer({"bootstrap.servers": system_topics})
    raw.produce(END, codec.encode(forged), partition=row.partition)
    assert raw.flush(10) == 0
    wait_until(
        lambda: metric(coordinator, "rmq_transactions_refused_total") >= 1,
        timeout=30,
        what="the refusal",
    )
    assert read_committed(system_topics, topic, 0, timeout=3) == []
    [parked] = [
        r
        for r in read_committed(system_topics, naming.POISON_TOPIC, 0, timeout=3)
        if forged.transaction_id.encode() in r.value()
    ]
    assert headers(parked)["source.topic"] == END.encode()
    assert headers(parked)["reason"].startswith(b"refused: decision for half offset")


@pytest.mark.parametrize(
    ("kind", "configs"),
    [pytest.param(kind, {}, id=f"{kind}-group-commit") for kind in worker_kinds()]
    + [  # a minute and a half: 900 transactions, each COMMIT applied by the coordinator
        pytest.param("process", DIRECT_COMMIT_2S, id="direct-commit", marks=pytest.mark.long)
    ],
)
def test_a_coordinator_killed_mid_stream_commits_every_message_exactly_once(
    kind, configs, system_topics, make_transaction_producer, new_topic, new_group
) -> None:
    """On a topic made for direct commits the producer appends its own COMMITs; the killed
    coordinator's successor settles the UNKNOWN ones after the fence, searching first."""
    topic = new_topic(partitions=2, **configs)
    group = new_group("PG")

    def decision_of(body: str) -> TransactionStatus:
        n = int(body[1:])
        return [TransactionStatus.COMMIT, TransactionStatus.ROLLBACK, TransactionStatus.UNKNOWN][
            n % 3
        ]

    # UNKNOWN ones are settled by the check-back: even numbers commit, odd ones roll back.
    def checker(msg):
        return (
            TransactionStatus.COMMIT if int(msg.body[1:]) % 2 == 0 else TransactionStatus.ROLLBACK
        )

    def committed(body: str) -> bool:
        status = decision_of(body)
        return status == TransactionStatus.COMMIT or (
            status == TransactionStatus.UNKNOWN and int(body[1:]) % 2 == 0
        )

    producer = make_transaction_producer(group, checker)
    sent = [f"m{i}" for i in range(900)]
    expected = {b for b in sent if committed(b)}

    def coordinator(worker_id: str):
        worker = start_worker(
            kind,
            *("adapter", "worker", "transactions", "--bootstrap", system_topics),
            *("--worker-id", worker_id, "--transaction-timeout-ms", "1500"),
            *("--check-interval-ms", "1000"),
        )
        worker.wait_for_output("transaction coordinator")
        return worker

    def send_all() -> None:
        for body in sent:
            producer.send_message_in_transaction(
                message(topic, body), lambda _m, _a, b=body: decision_of(b)
            )
            time.sleep(0.005)

    first = coordinator(unique("killed"))
    sender = threading.Thread(target=send_all)
    sender.start()
    try:
        visible = wait_until(
            lambda: (n := len(read_committed(system_topics, topic, 0, timeout=0.5))) >= 100 and n,
            timeout=90,
            what="commits under way",
        )
        assert sender.is_alive() or visible < len(expected), "the kill comes mid-stream"
    finally:
        first.kill()
        sender.join(120)

    second = coordinator(unique("successor"))
    try:
        records = read_committed(system_topics, topic, len(expected), timeout=150)
    finally:
        assert second.terminate() == 0, "the coordinator stops cleanly on SIGTERM"
    counts = bodies(records)
    assert set(counts) - expected == set(), "no rolled-back message is ever visible"
    assert expected - set(counts) == set(), "no committed message lost"
    assert [b for b, c in counts.items() if c > 1] == [], "no message twice"


def test_worker_all_runs_the_forwarder_and_the_coordinator_in_one_process(
    system_topics, make_transaction_producer, make_producer, new_topic, new_group
) -> None:
    port = local_broker.free_port_pair()
    worker = start_worker(
        "process",
        *("adapter", "worker", "all", "--bootstrap", system_topics),
        *("--metrics-port", str(port), "--transaction-timeout-ms", "1500"),
    )

    def metric(name: str) -> float:
        url = f"http://127.0.0.1:{port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as page:  # noqa: S310 - our own port
            lines = page.read().decode().splitlines()
        return sum(float(line.split()[-1]) for line in lines if line.startswith(name))

    try:
        worker.wait_for_output("transaction coordinator")  # the forwarder proves itself below
        topic = new_topic(partitions=1)
        producer = make_transaction_producer(new_group("PG"), answers(TransactionStatus.UNKNOWN))
        producer.send_message_in_transaction(
            message(topic, "txn"), answers(TransactionStatus.COMMIT)
        )
        delayed = message(topic, "delayed")
        delayed.set_delay_time_level(1)
        make_producer().send_sync(delayed)
        assert bodies(read_committed(system_topics, topic, 2)) == Counter({"txn": 1, "delayed": 1})
        wait_until(
            lambda: (
                metric("rmq_transactions_commits_total") >= 1
                and metric("rmq_schedule_forwarded_total") >= 1
            ),
            timeout=30,
            what="both workers' metrics on one endpoint",
        )
    finally:
        assert worker.terminate() == 0, "both workers stop cleanly on SIGTERM"


def test_a_transactional_message_with_a_delay_is_refused_before_anything_is_sent(
    system_topics, make_transaction_producer, new_topic, new_group
) -> None:
    from adapter.exceptions import ProducerSendSyncFailed

    producer = make_transaction_producer(new_group("PG"), answers(TransactionStatus.UNKNOWN))
    msg = message(new_topic(partitions=1), "delayed")
    msg.set_delay_time_level(2)
    local = answers(TransactionStatus.COMMIT)
    with pytest.raises(ProducerSendSyncFailed, match="delay"):
        producer.send_message_in_transaction(msg, local)
    assert local.seen == []


def test_a_successor_coordinator_goes_on_counting_checks_where_its_predecessor_stopped(
    system_topics, start_coordinator, make_transaction_producer, new_topic, new_group
) -> None:
    first = start_coordinator(**FAST)
    topic = new_topic(partitions=1)
    checker = answers(TransactionStatus.UNKNOWN)
    producer = make_transaction_producer(new_group("PG"), checker)
    sent = producer.send_message_in_transaction(message(topic, "undecided"), answers(None))
    wait_until(lambda: checker.seen, timeout=30, what="the first check")

    first.stop()
    start_coordinator(**FAST)

    wait_until(
        lambda: discarded_rows(system_topics, sent.msg_id),
        timeout=60,
        what="the discard by the successor",
    )
    times = [m.get_property(prop.TRANSACTION_CHECK_TIMES) for m in checker.seen]
    assert times == [b"1", b"2", b"3"], "the count survives the takeover, no check is repeated"


def test_on_an_injected_clock_checks_come_exactly_at_the_timeout_then_every_interval(
    clock_kafka: str, new_group
) -> None:
    clock = ManualClock()
    policy = CheckPolicy(transaction_timeout_ms=6_000, check_interval_ms=30_000)
    coordinator = TransactionCoordinator(
        CoordinatorConfig(
            KafkaSettings(clock_kafka), policy=policy, worker_id=unique("test"), max_wait_ms=100
        ),
        clock=clock,
    )
    producer = TransactionMQProducer(new_group("PG"), answers(None), clock=clock)
    producer.set_name_server_address(clock_kafka)
    producer.start()
    try:
        sent = producer.send_message_in_transaction(
            message(create_topic(clock_kafka, partitions=1), "undecided"),
            answers(TransactionStatus.UNKNOWN),
        )

        def checks_so_far() -> int:
            coordinator.drain()
            [pending] = [
                p for _, p in coordinator.pending() if p.info.transaction_id == sent.msg_id
            ]
            return pending.check_times

        assert checks_so_far() == 0
        for advance, checks in ((5_999, 0), (1, 1), (29_999, 1), (1, 2)):
            clock.advance(advance)
            assert checks_so_far() == checks, f"{checks} checks after {advance} ms more"
    finally:
        producer.shutdown()
        coordinator.close()


def discard_one(start_coordinator, make_transaction_producer, topic, group, system_topics):  # type: ignore[no-untyped-def]
    """A transaction the coordinator gave up on after check-max checks, and its checker."""
    start_coordinator(**FAST)
    checker = answers(TransactionStatus.UNKNOWN)
    producer = make_transaction_producer(group, checker)
    sent = producer.send_message_in_transaction(message(topic, "undecided"), answers(None))
    wait_until(lambda: discarded_rows(system_topics, sent.msg_id), timeout=60, what="the discard")
    checker.status = TransactionStatus.COMMIT  # the application was fixed meanwhile
    return sent.msg_id


def test_a_second_resume_is_refused_and_the_message_arrives_once(
    system_topics, start_coordinator, make_transaction_producer, new_topic, new_group
) -> None:
    topic = new_topic(partitions=1)
    tid = discard_one(
        start_coordinator, make_transaction_producer, topic, new_group("PG"), system_topics
    )
    resume = ["transactions", "resume", "--bootstrap", system_topics, tid]
    first = CliRunner().invoke(cli, resume)
    second = CliRunner().invoke(cli, resume)
    assert first.exit_code == 0, first.output
    assert second.exit_code == 1
    assert f"transaction {tid} was already resumed" in second.output
    assert bodies(read_committed(system_topics, topic, 1)) == Counter({"undecided": 1})

    [row] = discarded_rows(system_topics, tid)
    assert row.resumed_at_ms is not None
    assert row.resumed_as is not None
    listed = (
        CliRunner()
        .invoke(cli, ["transactions", "list", "--discarded", "--bootstrap", system_topics])
        .output
    )
    [line] = [line for line in listed.splitlines() if tid in line]
    assert " ago " in line, "the list says when it was resumed"


def test_two_concurrent_resumes_of_one_message_deliver_it_once(
    system_topics, start_coordinator, make_transaction_producer, new_topic, new_group
) -> None:
    topic = new_topic(partitions=1)
    tid = discard_one(
        start_coordinator, make_transaction_producer, topic, new_group("PG"), system_topics
    )
    outcomes: list[object] = []
    go = threading.Barrier(2)

    def resume() -> None:
        go.wait(10)
        try:
            outcomes.append(admin.resume(KafkaSettings(system_topics), tid))
        except AdapterError as refused:
            outcomes.append(refused)

    racers = [threading.Thread(target=resume) for _ in range(2)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(120)
    resumed = [o for o in outcomes if isinstance(o, admin.Resumed)]
    refused = [o for o in outcomes if isinstance(o, AdapterError)]
    assert (len(resumed), len(refused)) == (1, 1), outcomes
    assert bodies(read_committed(system_topics, topic, 1)) == Counter({"undecided": 1})


def test_resuming_a_pending_transaction_is_refused_with_the_reason(
    system_topics, start_coordinator, make_transaction_producer, new_topic, new_group
) -> None:
    start_coordinator(transaction_timeout_ms=60_000)
    producer = make_transaction_producer(new_group("PG"), answers(TransactionStatus.UNKNOWN))
    sent = producer.send_message_in_transaction(
        message(new_topic(partitions=1), "still open"), answers(None)
    )
    wait_until(lambda: pending_rows(system_topics, sent.msg_id), timeout=60, what="pending")
    done = CliRunner().invoke(
        cli, ["transactions", "resume", "--bootstrap", system_topics, sent.msg_id]
    )
    assert done.exit_code == 1
    assert f"transaction {sent.msg_id} is pending, not discarded" in done.output
