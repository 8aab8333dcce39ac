"""The three-broker cluster with its system topics, for the fault and security tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from adapter import naming
from adapter.config import ENV_DELAY_LEVELS
from adapter.ops.cli import main as cli
from tests.cluster import KafkaCluster

LEVELS = "1s 1s 1s 2s"
"""Short delay levels, so that retries and delayed messages come back within seconds."""
SYSTEM = [
    naming.kafka_topic(t)
    for t in (
        naming.TRANS_HALF_TOPIC,
        naming.TRANS_END_TOPIC,
        naming.TRANS_OP_TOPIC,
        naming.SCHEDULE_TOPIC,
    )
]


@pytest.fixture(scope="session")
def cluster(kafka_cluster: KafkaCluster) -> KafkaCluster:
    """The cluster with its system topics, made by `topics init` with the defaults it picks."""
    env = {ENV_DELAY_LEVELS: LEVELS}
    init = ["topics", "init", "--bootstrap", kafka_cluster.bootstrap]
    refused = CliRunner().invoke(cli, [*init, "--replication-factor", "1"], env=env)
    assert refused.exit_code != 0
    assert "refusing replication factor 1 on a cluster of 3 brokers" in refused.output
    done = CliRunner().invoke(cli, init, env=env)
    assert done.exit_code == 0, done.output
    assert "replication 3, min ISR 2" in done.output, done.output
    return kafka_cluster


@pytest.fixture(autouse=True)
def short_levels(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_DELAY_LEVELS, LEVELS)


@pytest.fixture(autouse=True)
def healthy_afterwards(cluster: KafkaCluster) -> Iterator[None]:
    """Whatever a test did to the nodes, the next one starts on a whole cluster."""
    yield
    for node in cluster.nodes:
        status = node.status()
        if status == "paused":
            node.unpause()
        elif status != "running":
            node.start()
    cluster.wait_healthy(SYSTEM)
