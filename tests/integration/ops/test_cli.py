"""``rmq-adapter broker`` and ``rmq-adapter topics init`` as a user runs them."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic

from adapter.ops import broker

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

CLI = [sys.executable, "-m", "adapter"]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=150, env=env, check=False
    )


def test_topics_init_creates_the_layout_once_and_then_reports_it_unchanged(
    kafka_bootstrap: str,
) -> None:
    first = run("topics", "init", "--bootstrap", kafka_bootstrap)
    assert first.returncode == 0, first.stderr
    second = run("topics", "init", "--bootstrap", kafka_bootstrap)
    assert second.returncode == 0, second.stderr
    assert "created" not in second.stdout
    assert "ok       SCHEDULE_TOPIC_XXXX (23 partitions)" in second.stdout, "18 levels, 5 hops"
    assert "ok       RMQ_SYS_TRANS_HALF_TOPIC (8 partitions)" in second.stdout


def test_topics_init_refuses_a_layout_that_breaks_the_rules_and_says_why(
    kafka_bootstrap: str,
) -> None:
    assert run("topics", "init", "--bootstrap", kafka_bootstrap).returncode == 0
    refused = run("topics", "init", "--bootstrap", kafka_bootstrap, "--half-partitions", "3")
    assert refused.returncode == 1
    assert "refusing to initialise the topics" in refused.stderr
    assert "RMQ_SYS_TRANS_HALF_TOPIC has 8 partitions, expected 3" in refused.stderr
    levels = run("topics", "init", "--bootstrap", kafka_bootstrap, "--delay-levels", "1s 5s")
    assert levels.returncode == 1
    assert "SCHEDULE_TOPIC_XXXX has 23 partitions, expected 7" in levels.stderr


def test_topics_init_refuses_a_replication_the_cluster_cannot_hold(kafka_bootstrap: str) -> None:
    refused = run("topics", "init", "--bootstrap", kafka_bootstrap, "--replication-factor", "3")
    assert refused.returncode == 1
    assert "replication factor 3 needs 3 brokers; the cluster has 1" in refused.stderr


def test_a_bad_delay_level_string_is_a_clear_error(kafka_bootstrap: str) -> None:
    bad = run("topics", "init", "--bootstrap", kafka_bootstrap, "--delay-levels", "1s 5x")
    assert bad.returncode == 1
    assert "messageDelayLevel entry 2 is '5x'" in bad.stderr


def test_broker_start_refuses_a_taken_port(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = run("broker", "start", "--data-dir", str(tmp_path), "--port", str(port))
    assert result.returncode == 1
    assert f"port {port} on 127.0.0.1 is taken" in result.stderr


def test_broker_start_says_so_when_java_is_missing(tmp_path: Path) -> None:
    bin_dir = tmp_path / "empty-bin"
    bin_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(bin_dir)
    assert shutil.which("java", path=env["PATH"]) is None
    result = run(
        "broker",
        "start",
        "--data-dir",
        str(tmp_path / "d"),
        "--port",
        str(broker.free_port_pair()),
        env=env,
    )
    assert result.returncode == 1
    assert "Java is missing" in result.stderr


def test_a_broker_starts_prints_its_address_and_stops_by_its_pid(tmp_path: Path) -> None:
    port = broker.free_port_pair()
    started = run("broker", "start", "--data-dir", str(tmp_path), "--port", str(port))
    try:
        assert started.returncode == 0, started.stderr
        assert started.stdout.strip() == f"127.0.0.1:{port}"
        pid = broker.read_pid(tmp_path)
        assert pid is not None
        assert broker._alive(pid)
        again = run("broker", "start", "--data-dir", str(tmp_path), "--port", str(port))
        assert again.returncode == 1
        assert "already runs" in again.stderr
        # The controller's port (the next one) is recognised and named, in one line.
        controller = f"127.0.0.1:{port + 1}"
        wrong = run("status", "--bootstrap", controller, "--timeout", "5")
        assert wrong.returncode == 1
        [line] = wrong.stderr.strip().splitlines()
        assert f"{controller} is a KRaft controller's port, not a broker's" in line, line
    finally:
        stopped = run("broker", "stop", "--data-dir", str(tmp_path))
    assert stopped.returncode == 0
    assert "stopped the broker" in stopped.stdout
    assert not broker._alive(pid)
    assert broker._port_is_free(port)


def test_status_shows_each_levels_backlog_and_the_dead_letters_of_each_group(
    system_topics: str, make_producer, new_group
) -> None:
    from adapter import naming
    from adapter.client import Message
    from adapter.kafka import clients

    producer = make_producer()
    for i in range(3):
        message = Message("StatusTopic")
        message.set_body(f"waits two hours {i}")
        message.set_delay_time_level(18)
        producer.send_sync(message)
    group = new_group()
    raw = clients.producer({"bootstrap.servers": system_topics})
    for i in range(2):
        raw.produce(naming.kafka_topic(naming.dlq_topic(group)), f"dead {i}".encode())
    assert raw.flush(10) == 0

    shown = run("status", "--bootstrap", system_topics)
    assert shown.returncode == 0, shown.stderr
    rows = {line.split()[0]: line.split() for line in shown.stdout.splitlines() if line.strip()}
    assert rows["18"][1] == "2h"
    assert int(rows["18"][2]) >= 3, "three messages wait on level 18"
    assert rows["18"][3] == "in"
    assert rows[group][1:] == ["0", "2"], "no retry backlog, two dead letters"


def test_status_counts_only_committed_records_as_backlog(system_topics: str, new_group) -> None:
    # A Kafka transaction leaves a marker at an offset of its own, and an aborted one its
    # records too; neither will ever be consumed, so neither is backlog.
    from adapter import naming
    from adapter.kafka import clients
    from tests.support import unique

    group = new_group()
    retry = naming.kafka_topic(naming.retry_topic(group))
    admin = clients.admin({"bootstrap.servers": system_topics})
    admin.create_topics([NewTopic(retry, 1, 1)])[retry].result(30)
    writer = clients.producer(
        {"bootstrap.servers": system_topics, "transactional.id": unique("status-test")}
    )
    writer.init_transactions(30)
    for outcome in ("abort", "commit", "abort"):
        writer.begin_transaction()
        writer.produce(retry, f"{outcome}ed".encode())
        writer.flush(30)
        if outcome == "abort":
            writer.abort_transaction(30)
        else:
            writer.commit_transaction(30)

    shown = run("status", "--bootstrap", system_topics)
    assert shown.returncode == 0, shown.stderr
    [row] = [line.split() for line in shown.stdout.splitlines() if line.startswith(group)]
    assert row[1:] == ["1", "0"], "one committed record waits; markers and aborted ones do not"


@pytest.mark.parametrize("kind", ["schedule", "all"])
def test_a_worker_whose_delay_levels_do_not_match_the_topic_exits_at_start_with_both_tables(
    system_topics: str, kind: str
) -> None:
    started = subprocess.run(
        [*CLI, "worker", kind, "--bootstrap", system_topics, "--delay-levels", "1s 5s"],
        capture_output=True,
        text=True,
        timeout=60,  # it used to log an ERROR every second, forever
        check=False,
    )
    assert started.returncode == 1
    [line] = started.stderr.strip().splitlines()
    assert "SCHEDULE_TOPIC_XXXX has 23 partitions but the delay level table needs 7" in line
    assert "'1s 5s' has 2 levels" in line
    assert "18 levels, as the default table '1s 5s 10s 30s 1m 2m" in line


def test_the_schedule_worker_serves_metrics_and_stops_cleanly_on_sigterm(
    system_topics: str,
) -> None:
    import urllib.request

    from tests.support import wait_until
    from tests.workers import start_worker

    port = broker.free_port_pair()
    worker = start_worker(
        "process",
        *("adapter", "worker", "schedule", "--bootstrap", system_topics),
        *("--metrics-port", str(port)),
    )

    def scrape() -> str | None:
        """The metrics page, once it shows level 1's backlog."""
        url = f"http://127.0.0.1:{port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as page:  # noqa: S310 - our own port
            text = page.read().decode()
        return text if 'rmq_schedule_backlog{level="1"}' in text else None

    try:
        worker.wait_for_output("assigned levels")
        text = wait_until(scrape, timeout=30, what="the backlog gauge of level 1")
    finally:
        assert worker.terminate() == 0
    assert 'rmq_schedule_backlog{level="18"}' in text
    assert "rmq_schedule_lateness_seconds_bucket" in text


def test_topics_create_makes_a_topic_with_its_queues_once_and_then_reports_it(
    kafka_bootstrap: str,
) -> None:
    from adapter.kafka import clients
    from tests.support import unique

    name = unique("UxOrders")
    first = run("topics", "create", name, "--partitions", "3", "--bootstrap", kafka_bootstrap)
    assert first.returncode == 0, first.stderr
    assert first.stdout.strip() == f"created  {name} (3 partitions, replication 1)"
    metadata = clients.admin({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10)
    assert len(metadata.topics[name].partitions) == 3
    again = run("topics", "create", name, "--bootstrap", kafka_bootstrap)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == f"ok       {name} (exists, 3 partitions; not changed to 4)"


def test_topics_create_makes_a_topic_for_priorities_with_a_kafka_topic_per_band(
    kafka_bootstrap: str,
) -> None:
    from adapter.kafka import clients
    from tests.support import unique

    name = unique("UxTasks")
    args = ("topics", "create", name, "--priorities", "3", "--partitions", "2")
    first = run(*args, "--bootstrap", kafka_bootstrap)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == [
        f"created  {name} (2 partitions, replication 1)",
        f"created  {name} priority 1: {name}.priority-1 (2 partitions, replication 1)",
        f"created  {name} priority 2: {name}.priority-2 (2 partitions, replication 1)",
    ]
    metadata = clients.admin({"bootstrap.servers": kafka_bootstrap}).list_topics(timeout=10)
    assert len(metadata.topics[f"{name}.priority-2"].partitions) == 2
    again = run(*args, "--bootstrap", kafka_bootstrap)
    assert (
        again.stdout.splitlines()[2]
        == f"ok       {name} priority 2: {name}.priority-2 (exists, 2 partitions)"
    )


def test_topics_create_with_direct_commit_makes_a_topic_that_bounds_its_appends_in_time(
    kafka_bootstrap: str,
) -> None:
    from adapter.kafka import clients
    from adapter.kafka.topics import describe_configs
    from tests.support import unique

    name = unique("UxPayments")
    made = run("topics", "create", name, "--direct-commit", "--bootstrap", kafka_bootstrap)
    assert made.returncode == 0, made.stderr
    admin = clients.admin({"bootstrap.servers": kafka_bootstrap})
    configs = describe_configs(admin, [name], 10)[name]
    assert configs["message.timestamp.before.max.ms"] == "5000"


def test_topics_create_with_direct_commit_fences_a_topic_that_exists_without_it(
    kafka_bootstrap: str,
) -> None:
    from adapter.kafka import clients
    from adapter.kafka.topics import describe_configs
    from tests.support import unique

    name = unique("UxRefunds")
    args = ("topics", "create", name, "--partitions", "2", "--bootstrap", kafka_bootstrap)
    assert run(*args).returncode == 0
    fenced = run(*args, "--direct-commit")
    assert fenced.returncode == 0, fenced.stderr
    assert fenced.stdout.strip() == (
        f"ok       {name} (exists, 2 partitions; now fenced for direct commits "
        "(message.timestamp.before.max.ms=5000))"
    )
    admin = clients.admin({"bootstrap.servers": kafka_bootstrap})
    assert describe_configs(admin, [name], 10)[name]["message.timestamp.before.max.ms"] == "5000"
    again = run(*args, "--direct-commit")
    assert again.stdout.strip() == f"ok       {name} (exists, 2 partitions)"


def test_topics_create_with_direct_commit_refuses_a_topic_stamped_at_append(
    kafka_bootstrap: str,
) -> None:
    from adapter.kafka import clients
    from adapter.kafka.topics import LOG_APPEND_TIME, Replication, create_topic, describe_configs
    from tests.support import unique

    name = unique("UxLedger")
    conf = {"bootstrap.servers": kafka_bootstrap}
    create_topic(conf, name, 1, Replication(1, 1), 10, LOG_APPEND_TIME)
    refused = run("topics", "create", name, "--direct-commit", "--bootstrap", kafka_bootstrap)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        f"Error: {name} is stamped at append (message.timestamp.type=LogAppendTime); "
        "direct commits need CreateTime: not changed"
    )
    configs = describe_configs(clients.admin(conf), [name], 10)[name]
    assert configs["message.timestamp.type"] == "LogAppendTime"
    assert configs["message.timestamp.before.max.ms"] != "5000"


def test_topics_create_refuses_a_system_topic_and_a_replication_the_cluster_cannot_hold(
    kafka_bootstrap: str,
) -> None:
    system = run("topics", "create", "SCHEDULE_TOPIC_XXXX", "--bootstrap", kafka_bootstrap)
    assert system.returncode == 1
    assert system.stderr.strip() == (
        "Error: Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden."
    )
    wide = run(
        "topics", "create", "Wide", "--replication-factor", "3", "--bootstrap", kafka_bootstrap
    )
    assert wide.returncode == 1
    assert "replication factor 3 needs 3 brokers; the cluster has 1" in wide.stderr
