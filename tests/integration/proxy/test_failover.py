"""Two proxies share one port; the one serving the official Java client is SIGKILLed in the
middle of a burst of transactions. The client's retries reach the other proxy, and in the end
every transaction the application committed is delivered once, none twice, and no rollback is
visible (the check-backs settle what the dead proxy held)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from adapter import naming
from tests.integration.proxy import java
from tests.integration.proxy.conftest import RunningProxy, StartProxy
from tests.integration.proxy.reads import all_records, records_with_ids, uniq
from tests.support import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.long, pytest.mark.timeout(300)]

BURST = 90


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def serving_the_client(proxies: list[RunningProxy]) -> RunningProxy | None:
    for proxy in proxies:
        if "rmq_proxy_sessions 1.0" in proxy.scrape()[1]:
            return proxy
    return None


def test_a_proxy_killed_mid_burst_loses_no_commit_and_shows_no_rollback(
    start_proxy: StartProxy,
    new_topic,
    start_coordinator,
    system_topics: str,
    tmp_path: Path,
) -> None:
    classpath = java.build()
    topic = new_topic(partitions=2, prefix="JBurst")
    start_coordinator(transaction_timeout_ms=1500, check_interval_ms=3000)
    listen = f"127.0.0.1:{free_port()}"
    proxies = [start_proxy("--reuse-port", listen=listen) for _ in range(2)]
    program = java.JavaProgram(classpath, tmp_path, "burst", listen, topic, str(BURST), "15")

    program.wait_for("DECIDED", count=20, timeout=60)
    victim = wait_until(lambda: serving_the_client(proxies), timeout=10, what="the client's proxy")
    victim.kill()
    program.finish(timeout=180)

    commit: set[str] = set()
    rollback: set[str] = set()
    for message_id, decision in program.words("DECIDED"):
        (commit if decision == "COMMIT" else rollback).add(message_id)
    for index, message_id, _ in program.words("FAILED"):
        if message_id != "null":  # sent: the application decided; the checker says so
            (commit if int(index) % 3 else rollback).add(message_id)
    assert len(commit) >= BURST // 2, program.output()
    survivor = next(p for p in proxies if p is not victim)
    sent_there = 'rmq_proxy_rpcs_total{code="OK",method="SendMessage"}'
    assert sent_there in survivor.scrape()[1], "the client went on through the other proxy"

    kafka_topic = naming.kafka_topic(topic)
    records_with_ids(system_topics, kafka_topic, commit, timeout=90)
    delivered = [uniq(r) for r in all_records(system_topics, kafka_topic, quiet_s=3)]
    assert sorted(delivered) == sorted(commit), (
        f"every commit once, nothing else:\n{program.output()}"
    )
    assert not rollback & set(delivered)
