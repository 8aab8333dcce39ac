"""The shipped dashboard and alert rules name only metrics the product exports, and the exporter
serves consumer lag under rocketmq-exporter's names.

The workers (``worker all``), a proxy and the exporter run as processes on the test broker and
are scraped; every metric named in an expression of ``grafana-dashboard.json`` or
``prometheus-alerts.yml`` must be one of theirs (or Prometheus's own ``up``).
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from adapter.client import ConsumeStatus, Message
from adapter.ops.exporter_cli import ALERTS, DASHBOARD, asset
from tests.support import unique, wait_until
from tests.workers import ProcessWorker

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

METRICS = re.compile(r"metrics and probes on (http://[\d.]+:\d+)/")
SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "gauge": ("",),
    "unknown": ("",),
}
PROMETHEUS_OWN = {"up"}


def started(*args: str, env: dict[str, str] | None = None) -> tuple[ProcessWorker, str]:
    worker = ProcessWorker("adapter", *args, "--metrics-port", "0", env=env)
    wait_until(
        lambda: any(METRICS.search(line) for line in list(worker.lines)),
        timeout=60,
        what=f"{args[0]}'s metrics endpoint",
    )
    [url] = {m.group(1) for line in list(worker.lines) if (m := METRICS.search(line))}
    return worker, url


def exposed(url: str) -> set[str]:
    """Every sample name the endpoint can serve, from its families' names and types."""
    text = urllib.request.urlopen(f"{url}/metrics", timeout=10).read().decode()  # noqa: S310
    names = set()
    for family in text_string_to_metric_families(text):
        names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ("",)))
    return names


def named_in(expression: str) -> set[str]:
    return set(re.findall(r"\b((?:rmq|rocketmq)_[a-z_]+|up)\b", expression))


def expressions() -> Iterator[str]:
    dashboard = json.loads(asset(DASHBOARD))
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            yield target["expr"]
    for group in yaml.safe_load(asset(ALERTS))["groups"]:
        for rule in group["rules"]:
            yield rule["expr"]


@pytest.fixture
def processes(system_topics: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    running = []
    try:
        for kind, args, env in (
            ("workers", ("worker", "all", "--bootstrap", system_topics), None),
            ("proxy", ("proxy", "--bootstrap", system_topics, "--listen", "127.0.0.1:0"),
             {"HOME": str(tmp_path)}),
            ("exporter", ("exporter", "--bootstrap", system_topics, "--interval", "1"), None),
        ):  # fmt: skip
            running.append((kind, *started(*args, env=env)))
        yield {kind: url for kind, _, url in running}
    finally:
        for _, worker, _ in running:
            if worker.process.poll() is None:
                assert worker.terminate(60) == 0, "".join(worker.lines[-30:])


def test_every_metric_of_the_dashboard_and_the_alerts_is_exported(processes) -> None:
    exported = set().union(*(exposed(url) for url in processes.values())) | PROMETHEUS_OWN
    wanted = {(name, expr) for expr in expressions() for name in named_in(expr)}
    assert len(wanted) > 20, "the files name the metrics"
    missing = sorted({(name, expr) for name, expr in wanted if name not in exported})
    assert not missing, f"named but not exported: {missing}"


def test_the_exporter_serves_a_group_s_lag_under_rocketmq_exporter_s_names(
    processes, kafka_bootstrap, new_topic, make_producer, make_consumer
) -> None:
    topic, group = new_topic(1, "Lagging"), unique("GID_lag")
    consumer = make_consumer(group, topic, lambda _m: ConsumeStatus.CONSUME_SUCCESS)
    producer = make_producer()
    message = Message(topic)
    message.set_body("first")
    producer.send_sync(message)
    wait_until(lambda: sample(processes["exporter"], "rocketmq_message_accumulation", group,
                              topic) == 0, timeout=60, what="the group consumed")  # fmt: skip
    consumer.shutdown()
    for n in range(3):
        message = Message(topic)
        message.set_body(f"late {n}")
        producer.send_sync(message)
    wait_until(
        lambda: sample(processes["exporter"], "rocketmq_message_accumulation", group, topic) == 3,
        timeout=60,
        what="a lag of 3",
    )
    assert sample(processes["exporter"], "rocketmq_consumer_offset", group, topic) == 1
    assert sample(processes["exporter"], "rocketmq_producer_offset", None, topic) == 4


def sample(url: str, name: str, group: str | None, topic: str) -> float | None:
    text = urllib.request.urlopen(f"{url}/metrics", timeout=10).read().decode()  # noqa: S310
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            ours = group is None or s.labels.get("group") == group
            if s.name == name and s.labels.get("topic") == topic and ours:
                return s.value
    return None
