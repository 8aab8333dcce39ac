"""SASL/SCRAM-SHA-512 over TLS with ACLs: seed 004 as an application and a worker of its own.

Three principals on the cluster's SECURE listener: ``admin`` (a super user, for the operator's
commands), the application and the adapter's workers, whose ACLs are the table of docs/production.md
(:func:`adapter.ops.acls.grants`). Every client takes its security settings from the
``RMQ_ADAPTER_KAFKA_*`` environment only; no password may reach a log line.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections import Counter
from dataclasses import replace

import pytest
from click.testing import CliRunner
from confluent_kafka.admin import (
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from adapter import naming
from adapter.client import ConsumeStatus, Message, TransactionStatus
from adapter.config import ENV_DELAY_LEVELS, KafkaSettings
from adapter.exceptions import AdapterError, DeliveryError, ProducerSendSyncFailed
from adapter.kafka import clients, reading, writing
from adapter.kafka.topics import ensure_single_queue_topic
from adapter.ops import acls
from adapter.ops.cli import main as cli
from adapter.properties import RETRY_TOPIC
from adapter.schedule import signing
from adapter.schedule.envelope import scheduled
from adapter.wire import codec
from tests.cluster import SCRAM, KafkaCluster
from tests.integration.cluster.conftest import LEVELS
from tests.support import create_topic, read_committed, unique, wait_until
from tests.workers import start_worker

pytestmark = [pytest.mark.kafka, pytest.mark.cluster, pytest.mark.timeout(240)]

HALF = naming.kafka_topic(naming.TRANS_HALF_TOPIC)
OP = naming.kafka_topic(naming.TRANS_OP_TOPIC)
PASSWORDS = {
    name: f"pw-{name}-{secrets.token_hex(8)}" for name in ("admin", "app", "other", "worker")
}
SCHEDULE = naming.kafka_topic(naming.SCHEDULE_TOPIC)

# Seed 004, RocketMQ's transactional example: ROLLBACK for Num0 and Num1, UNKNOWN for Num8 and
# Num9 (the check-back then answers COMMIT), COMMIT for the rest.
SEED_KEYS = [f"Num{i}" for i in range(10)]
SEED_LOCAL = {"Num0": "ROLLBACK", "Num1": "ROLLBACK", "Num8": "UNKNOWN", "Num9": "UNKNOWN"}


def principal_env(cluster: KafkaCluster, user: str) -> dict[str, str]:
    """The RMQ_ADAPTER_KAFKA_* settings of ``user`` on the secure listener."""
    return {
        "RMQ_ADAPTER_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "RMQ_ADAPTER_KAFKA_SASL_MECHANISMS": SCRAM,
        "RMQ_ADAPTER_KAFKA_SASL_USERNAME": user,
        "RMQ_ADAPTER_KAFKA_SASL_PASSWORD": PASSWORDS[user],
        "RMQ_ADAPTER_KAFKA_SSL_CA_LOCATION": cluster.ca,
    }


class Names:
    topic = ""
    other = ""
    producer_group = unique("PG_secure")
    consumer_group = unique("GID_secure")


class Others:
    """Another application, ``User:other``: its topic and groups."""

    topic = ""
    producer_group = unique("PG_other")
    consumer_group = unique("GID_other")


@pytest.fixture(scope="module")
def secured(cluster: KafkaCluster) -> KafkaCluster:
    """The users and the ACLs of docs/production.md, set up as a super user on the PLAINTEXT
    listener."""
    admin = cluster.admin()
    upserts = [
        UserScramCredentialUpsertion(
            name, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password.encode()
        )
        for name, password in PASSWORDS.items()
    ]
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result(timeout=30)
    Names.topic = create_topic(cluster.bootstrap, 2, "Secure")
    Names.other = create_topic(cluster.bootstrap, 1, "NotYours")
    table = acls.grants(
        "User:app",
        "User:worker",
        topics=[Names.topic],
        producer_groups=[Names.producer_group],
        consumer_groups=[Names.consumer_group],
    )
    Others.topic = create_topic(cluster.bootstrap, 1, "Theirs")
    table += acls.grants(
        "User:other",
        "User:worker",
        topics=[Others.topic],
        producer_groups=[Others.producer_group],
        consumer_groups=[Others.consumer_group],
    )
    for future in admin.create_acls(acls.bindings(table)).values():
        future.result(timeout=30)
    return cluster


@pytest.fixture
def as_application(secured: KafkaCluster, monkeypatch: pytest.MonkeyPatch) -> KafkaCluster:
    for name, value in principal_env(secured, "app").items():
        monkeypatch.setenv(name, value)
    return secured


def no_password_in(*texts: str) -> None:
    for text in texts:
        for password in PASSWORDS.values():
            assert password not in text, "a password reached the output"


def test_every_command_takes_the_security_settings_from_the_environment(
    secured: KafkaCluster,
) -> None:
    env = {**principal_env(secured, "admin"), ENV_DELAY_LEVELS: LEVELS}
    runner = CliRunner()
    outputs = []
    for command in (
        ["topics", "init", "--bootstrap", secured.secure_bootstrap],
        ["status", "--bootstrap", secured.secure_bootstrap],
        ["transactions", "list", "--bootstrap", secured.secure_bootstrap],
    ):
        done = runner.invoke(cli, command, env=env)
        outputs.append(done.output)
        assert done.exit_code == 0, f"{command}: {done.output}"
    assert "ok" in outputs[0]
    # resume reaches Kafka (fences its transactional id, reads the discard log) and then
    # refuses an id that was never discarded, which proves it got through the secure listener
    missing = unique("TX")
    resumed = runner.invoke(
        cli, ["transactions", "resume", "--bootstrap", secured.secure_bootstrap, missing], env=env
    )
    outputs.append(resumed.output)
    assert resumed.exit_code == 1
    assert f"transaction '{missing}' is not in" in resumed.output, resumed.output
    no_password_in(*outputs)


def test_seed_004_runs_under_the_acls_and_no_password_is_logged(
    as_application: KafkaCluster, make_transaction_producer, make_consumer, caplog
) -> None:
    cluster = as_application
    worker = start_worker(
        "process",
        "adapter",
        "worker",
        "all",
        "--bootstrap",
        cluster.secure_bootstrap,
        "--worker-id",
        unique("secure"),
        "--transaction-timeout-ms",
        "1500",
        "--check-interval-ms",
        "1000",
        env={**principal_env(cluster, "worker"), ENV_DELAY_LEVELS: LEVELS},
    )
    lock = threading.Lock()
    received: Counter[str] = Counter()

    def consume(msg) -> ConsumeStatus:  # type: ignore[no-untyped-def]
        with lock:
            received[msg.keys.decode()] += 1
        return ConsumeStatus.CONSUME_SUCCESS

    make_consumer(Names.consumer_group, Names.topic, consume, bootstrap=cluster.secure_bootstrap)
    producer = make_transaction_producer(
        Names.producer_group,
        lambda _msg: TransactionStatus.COMMIT,
        bootstrap=cluster.secure_bootstrap,
    )
    for key in SEED_KEYS:
        message = Message(Names.topic)
        message.set_keys(key)
        message.set_body(f"Hello RocketMQ Transaction Message{key[3:]}")
        outcome = TransactionStatus[SEED_LOCAL.get(key, "COMMIT")]
        producer.send_message_in_transaction(message, lambda *_a, o=outcome: o)

    expected = [k for k in SEED_KEYS if SEED_LOCAL.get(k) != "ROLLBACK"]
    try:
        wait_until(lambda: all(received[k] >= 1 for k in expected), timeout=90, what="Num2..Num9")
        time.sleep(3)  # a second delivery would have come by now
        assert dict(received) == dict.fromkeys(expected, 1), "Num2..Num9, once each"
    finally:
        code = worker.terminate(timeout=60)
        print("".join(worker.lines[-40:]))
    assert code == 0
    no_password_in("".join(worker.lines), caplog.text)


def test_the_points_job_reads_the_application_s_topic_with_the_same_settings(
    as_application: KafkaCluster, make_producer, tmp_path
) -> None:
    """Spark's Kafka source is the Java client: the application's librdkafka settings reach it
    under Java's names (a SCRAM login, a PEM trust store) and its ACLs let it read its topic."""
    cluster = as_application
    producer = make_producer(Names.producer_group, bootstrap=cluster.secure_bootstrap)
    for n in range(3):
        message = Message(Names.topic)
        message.set_body(f"not an OrderPaid {n}")
        producer.send_sync(message)
    on_topic = read_committed(cluster.bootstrap, Names.topic, 3)
    job = start_worker(
        "process",
        "adapter",
        "spark",
        "points",
        "--bootstrap",
        cluster.secure_bootstrap,
        "--topic",
        Names.topic,
        "--available-now",
        "--checkpoint",
        str(tmp_path / "checkpoint"),
        "--table",
        str(tmp_path / "ledger"),
        "--json",
        str(tmp_path / "result.json"),
        env=principal_env(cluster, "app"),
    )
    code = job.wait(180)
    output = "".join(job.lines)
    assert code == 0, output[-3000:]
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["input_rows"] == len(on_topic), "every record on the topic, read over SASL"
    assert result["rejected"] == len(on_topic), "none of them is a payment: each parked as such"
    no_password_in(output)


def test_an_application_reading_the_transaction_log_gets_a_clear_authorisation_error(
    as_application: KafkaCluster,
) -> None:
    done = CliRunner().invoke(
        cli, ["transactions", "list", "--bootstrap", as_application.secure_bootstrap]
    )
    assert done.exit_code == 1
    assert "RMQ_SYS_TRANS_OP_HALF_TOPIC" in done.output, done.output
    assert "not authorised to READ" in done.output, done.output
    no_password_in(done.output)


def test_an_application_reading_half_gets_a_clear_authorisation_error(
    as_application: KafkaCluster,
) -> None:
    settings = KafkaSettings.from_env(as_application.secure_bootstrap)
    # Kafka may refuse the read-back's group or the topic first: either names both.
    with pytest.raises(AdapterError, match="not authorised to READ topic RMQ_SYS_TRANS_HALF_TOPIC"):
        list(reading.read_to_end(settings.librdkafka({}), HALF, {0: 0}, timeout_s=30))


def test_an_application_writing_op_is_refused_by_kafka_not_left_hanging(
    as_application: KafkaCluster,
) -> None:
    settings = KafkaSettings.from_env(as_application.secure_bootstrap)
    producer = clients.producer(settings.librdkafka({}))
    with pytest.raises(DeliveryError, match="not authorised to WRITE topic RMQ_SYS_TRANS_OP_HALF"):
        writing.produce_and_ack(producer, OP, b"forged", timeout_s=30, partition=0)


def test_an_application_writing_a_topic_it_may_not_gets_a_clear_authorisation_error(
    as_application: KafkaCluster, make_producer
) -> None:
    producer = make_producer(bootstrap=as_application.secure_bootstrap)
    message = Message(Names.other)
    message.set_body("not mine")
    with pytest.raises(ProducerSendSyncFailed) as refused:
        producer.send_sync(message)
    assert Names.other in str(refused.value)
    assert "WRITE" in str(refused.value)


def test_a_worker_with_the_application_s_principal_says_what_it_may_not_do(
    as_application: KafkaCluster,
) -> None:
    worker = start_worker(
        "process",
        "adapter",
        "worker",
        "transactions",
        "--bootstrap",
        as_application.secure_bootstrap,
        "--worker-id",
        unique("wrong"),
        env=principal_env(as_application, "app"),
    )
    try:
        worker.wait_for_output("not authorised to READ", timeout=60)
    finally:
        assert worker.terminate(timeout=60) == 0
    text = "".join(worker.lines)
    assert "cannot see topic RMQ_SYS_TRANS_OP_HALF_TOPIC" in text, text[-2000:]
    no_password_in(text)


def bodies_on(cluster: KafkaCluster, topic: str) -> list[bytes]:
    """What a read_committed reader finds on ``topic`` within 5 s (as the super user)."""
    return [r.value() for r in read_committed(cluster.bootstrap, topic, 10**9, timeout=5)]


def test_an_application_cannot_reach_another_s_check_retry_or_dead_letter_topic_via_schedule(
    as_application: KafkaCluster,
) -> None:
    cluster = as_application
    theirs = [
        naming.check_topic(Others.producer_group),
        naming.retry_topic(Others.consumer_group),
        naming.dlq_topic(Others.consumer_group),
    ]
    new = [NewTopic(naming.kafka_topic(t), 1) for t in theirs]
    for future in cluster.admin().create_topics(new).values():
        future.result(timeout=30)
    settings = KafkaSettings.from_env(cluster.secure_bootstrap)  # the application's principal
    producer = clients.producer(settings.librdkafka({}))
    with pytest.raises(DeliveryError, match="not authorised to WRITE topic %CHECK%"):
        writing.produce_and_ack(producer, naming.kafka_topic(theirs[0]), b"forged", timeout_s=30)
    worker = start_worker(
        "process",
        *("adapter", "worker", "schedule", "--bootstrap", cluster.secure_bootstrap),
        *("--worker-id", unique("acl")),
        env={**principal_env(cluster, "worker"), ENV_DELAY_LEVELS: LEVELS},
    )
    forbidden = [*theirs, naming.TRANS_HALF_TOPIC]
    mark = unique("via-schedule")
    for topic in [*forbidden, Names.topic]:
        message = Message(topic)
        message.set_body(f"{mark} to {topic}")
        record = scheduled(message, level=1, unique_key=unique("ID"), born_ms=0)
        writing.produce_and_ack(producer, SCHEDULE, codec.encode(record), timeout_s=30, partition=0)
    try:
        mine = f"{mark} to {Names.topic}".encode()
        wait_until(lambda: mine in bodies_on(cluster, Names.topic), timeout=90, what="its own")
        parked = {
            r.value(): dict(r.headers())["reason"].decode()
            for r in read_committed(cluster.bootstrap, naming.POISON_TOPIC, 10**9, timeout=5)
            if (r.value() or b"").find(mark.encode()) >= 0
        }
    finally:
        assert worker.terminate(timeout=60) == 0
    for topic in theirs:
        assert bodies_on(cluster, topic) == [], f"nothing reached {topic}"
    reasons = sorted(parked.values())
    assert len(reasons) == len(forbidden), reasons
    assert all(why.startswith("refused destination: ") for why in reasons), reasons
    no_password_in("".join(worker.lines))


def test_with_grants_an_application_reaches_only_its_own_topics_through_schedule(
    as_application: KafkaCluster, make_producer, monkeypatch, tmp_path
) -> None:
    cluster = as_application
    keys = {"app": secrets.token_urlsafe(32), "other": secrets.token_urlsafe(32)}
    grants = tmp_path / "grants.json"
    grants.write_text(
        json.dumps(
            {
                "applications": {
                    "app": {
                        "key": keys["app"],
                        "topics": [Names.topic],
                        "consumer_groups": [Names.consumer_group],
                    },
                    "other": {"key": keys["other"], "topics": [Others.topic]},
                }
            }
        )
    )
    retry_theirs = naming.retry_topic(Others.consumer_group)
    ensure_single_queue_topic(cluster.admin(), naming.kafka_topic(retry_theirs), 30)
    worker = start_worker(
        "process",
        *("adapter", "worker", "schedule", "--bootstrap", cluster.secure_bootstrap),
        *("--worker-id", unique("grants"), "--schedule-grants", str(grants)),
        env={**principal_env(cluster, "worker"), ENV_DELAY_LEVELS: LEVELS},
    )
    monkeypatch.setenv(signing.ENV_SIGNER, "app")
    monkeypatch.setenv(signing.ENV_KEY, keys["app"])
    mark = unique("granted")
    mine = Message(Names.topic)
    mine.set_body(f"{mark} mine")
    mine.set_delay_time_level(1)
    make_producer(bootstrap=cluster.secure_bootstrap).send_sync(mine)  # signed by the producer

    def record_to(topic: str, what: str, reconsume_times: int = 0) -> bytes:
        message = Message(topic)
        message.set_body(f"{mark} {what}")
        record = scheduled(message, level=1, unique_key=unique("ID"), born_ms=0)
        if reconsume_times:  # a send-back's shape: counted, with its original topic
            record.properties[RETRY_TOPIC] = Others.topic
            record = replace(record, reconsume_times=reconsume_times)
        return codec.encode(record)

    app = signing.ScheduleSigner("app", keys["app"].encode())
    claimed = signing.ScheduleSigner("other", keys["app"].encode())  # "other" without its key
    forged = {
        "theirs signed as app": (record_to(Others.topic, "theirs signed as app"), app),
        "theirs claimed as other": (record_to(Others.topic, "theirs claimed as other"), claimed),
        "theirs unsigned": (record_to(Others.topic, "theirs unsigned"), None),
        "their retry": (record_to(retry_theirs, "their retry", reconsume_times=1), app),
    }
    producer = clients.producer(KafkaSettings.from_env(cluster.secure_bootstrap).librdkafka({}))
    for value, signer in forged.values():
        headers = list(signer.headers(value)) if signer is not None else []
        writing.produce_and_ack(
            producer, SCHEDULE, value, timeout_s=30, partition=0, headers=headers
        )
    try:
        wait_until(
            lambda: f"{mark} mine".encode() in bodies_on(cluster, Names.topic),
            timeout=90,
            what="its own delayed message",
        )
        parked: dict[str, str] = {}

        def all_parked() -> bool:
            for r in read_committed(cluster.bootstrap, naming.POISON_TOPIC, 10**9, timeout=5):
                # Earlier tests park other records here too: a refused END has no body.
                parked_record = codec.decode(r.value()) if r.value() else None
                body = getattr(parked_record, "body", b"").decode(errors="replace")
                if body.startswith(mark):
                    parked[body.removeprefix(f"{mark} ")] = dict(r.headers())["reason"].decode()
            return len(parked) == len(forged)

        wait_until(all_parked, timeout=60, what="the forged records parked")
    finally:
        assert worker.terminate(timeout=60) == 0
    assert bodies_on(cluster, Others.topic) == [], "nothing reached the other's topic"
    assert bodies_on(cluster, retry_theirs) == [], "nor its retry topic"
    app_name = repr("app")
    assert parked == {
        "theirs signed as app": f"refused destination: {app_name} is not granted {Others.topic!r}",
        "theirs claimed as other": "refused destination: the signature of 'other' does not "
        "match the record",
        "theirs unsigned": "refused destination: unsigned: this forwarder takes records signed "
        "by a granted application",
        "their retry": f"refused destination: {app_name} is not granted {retry_theirs!r}",
    }
    no_password_in("".join(worker.lines))
    assert keys["app"] not in "".join(worker.lines), "no key in a log line"
