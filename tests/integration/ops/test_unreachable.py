"""A wrong or unreachable Kafka address: every entry point fails within its deadline with one
clear line naming the address and the cause, in the class the RocketMQ original raises."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from adapter.client import Message, Producer, PushConsumer, TransactionMQProducer
from adapter.exceptions import (
    ProducerSendSyncFailed,
    ProducerStartFailed,
    PushConsumerStartFailed,
    RocketMQException,
)
from tests.support import unique
from tests.workers import start_worker

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]

NOBODY = "127.0.0.1:1"  # nothing listens on port 1
COMMANDS = [
    ["topics", "init"],
    ["status"],
    ["transactions", "list"],
    ["transactions", "list", "--discarded"],
    ["transactions", "resume", "0A0B0C"],
]


def rmq_adapter(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RMQ_ADAPTER_")}
    return subprocess.run(
        [sys.executable, "-m", "adapter", *args],
        capture_output=True,
        text=True,
        timeout=45,  # the deadline: --timeout 1 plus the interpreter's start
        env={**clean, **(env or {})},
        check=False,
    )


def assert_one_clear_line(done: subprocess.CompletedProcess[str], *expected: str) -> None:
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, f"one line, not:\n{done.stderr}"
    for text in expected:
        assert text in lines[0]
    for noise in ("Traceback", "%3|", "%4|", "%6|"):
        assert noise not in done.stderr + done.stdout


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_command_against_an_unreachable_address_says_so_in_one_line(command: list[str]) -> None:
    done = rmq_adapter(*command, "--bootstrap", NOBODY, "--timeout", "1")
    assert_one_clear_line(done, f"cannot reach Kafka at {NOBODY}", "Connection refused")


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_command_takes_the_address_from_the_environment(command: list[str]) -> None:
    done = rmq_adapter(*command, env={"RMQ_ADAPTER_BOOTSTRAP": NOBODY, "RMQ_ADAPTER_TIMEOUT": "1"})
    assert_one_clear_line(done, f"cannot reach Kafka at {NOBODY}")


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_command_applies_the_kafka_settings_of_the_environment(
    command: list[str], kafka_bootstrap: str
) -> None:
    # A SASL client against a plaintext listener: the handshake fails, which shows the
    # RMQ_ADAPTER_KAFKA_* settings reached the command's clients.
    done = rmq_adapter(
        *command,
        env={
            "RMQ_ADAPTER_BOOTSTRAP": kafka_bootstrap,
            "RMQ_ADAPTER_TIMEOUT": "1",
            "RMQ_ADAPTER_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
            "RMQ_ADAPTER_KAFKA_SASL_MECHANISMS": "PLAIN",
            "RMQ_ADAPTER_KAFKA_SASL_USERNAME": "app",
            "RMQ_ADAPTER_KAFKA_SASL_PASSWORD": "secret-password",
        },
    )
    assert_one_clear_line(done, f"cannot reach Kafka at {kafka_bootstrap}")
    assert "secret-password" not in done.stderr + done.stdout


def test_a_transactional_producer_that_cannot_reach_kafka_fails_start_as_rocketmq_does() -> None:
    producer = TransactionMQProducer(unique("PG"), lambda msg: None)
    producer.set_name_server_address(NOBODY)
    with pytest.raises(ProducerStartFailed, match=NOBODY) as failure:
        producer.start()
    assert isinstance(failure.value, RocketMQException)


def test_a_push_consumer_that_cannot_reach_kafka_fails_start_as_rocketmq_does() -> None:
    consumer = PushConsumer(unique("GID"))
    consumer.set_name_server_address(NOBODY)
    consumer.subscribe("Orders", lambda msg: None)
    with pytest.raises(PushConsumerStartFailed, match=NOBODY) as failure:
        consumer.start()
    assert isinstance(failure.value, RocketMQException)
    assert "cannot reach Kafka" in str(failure.value), "unreachable, not a topic creation failing"
    assert "controller" not in str(failure.value)


APPLICATION = """
from adapter.client import Message, Producer, PushConsumer
from adapter.exceptions import RocketMQException
from adapter.v5 import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

consumer = PushConsumer("GID_app")
consumer.set_name_server_address("{address}")
consumer.subscribe("Orders", lambda msg: None)
try:
    consumer.start()
except RocketMQException as exc:
    print("push consumer:", type(exc).__name__)
config = ClientConfiguration("{address}", Credentials())
simple = SimpleConsumer(config, "GID_app_simple", {{"Orders": FilterExpression()}})
try:
    simple.startup()
    simple.receive(1, 15)
    simple.shutdown()
except RocketMQException as exc:
    print("simple consumer:", type(exc).__name__)
"""


@pytest.mark.parametrize("address", [NOBODY, "kafka"], ids=["unreachable", "reachable"])
def test_an_application_without_logging_set_up_gets_no_librdkafka_lines_on_stderr(
    address: str, kafka_bootstrap: str
) -> None:
    # RocketMQ's clients write their logs to their own files; an application that has not
    # configured Python logging must not see librdkafka's [thrd:...] lines, nor the share
    # consumer's "Preview" warning, on its standard error.
    script = APPLICATION.format(address=kafka_bootstrap if address == "kafka" else address)
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=90,
        env={k: v for k, v in os.environ.items() if not k.startswith("RMQ_ADAPTER_")},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "[thrd:" not in done.stderr, done.stderr
    assert "Preview" not in done.stderr, done.stderr


def test_a_send_that_cannot_reach_kafka_fails_within_the_send_timeout_naming_the_address() -> None:
    producer = Producer(unique("PID"), timeout=2000)
    producer.set_name_server_address(NOBODY)
    producer.start()  # RocketMQ's client starts without its name server, too
    message = Message("Orders")
    message.set_body("lost?")
    try:
        with pytest.raises(ProducerSendSyncFailed, match=NOBODY):
            producer.send_sync(message)
    finally:
        producer.shutdown()


@pytest.mark.long  # twenty seconds: a worker retries an address nobody serves
def test_a_worker_that_cannot_reach_kafka_says_so_once_keeps_trying_and_stops_on_sigterm() -> None:
    worker = start_worker(
        "process", "adapter", "worker", "all", "--bootstrap", NOBODY, "--worker-id", unique("w")
    )
    worker.wait_for_output(f"cannot reach Kafka at {NOBODY}", timeout=60)
    assert worker.terminate(timeout=60) == 0
    errors = [line for line in worker.lines if '"level": "ERROR"' in line]
    assert 1 <= len(errors) <= 4, "once per worker and state change, not once a turn:\n" + "".join(
        errors
    )
    assert all("Traceback" not in line for line in worker.lines)
