"""The overview's proxies: read from a proxy's own metrics, and a proxy that does not answer."""

from __future__ import annotations

import socket

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from adapter.console.proxies import probe, probe_all, read_metrics
from adapter.proxy.codes import Code
from adapter.proxy.metrics import ProxyMetrics

pytestmark = pytest.mark.timeout(10)


def metrics_of_a_proxy_that_served(ok: int, failed: int, sessions: int) -> str:
    registry = CollectorRegistry()
    metrics = ProxyMetrics(registry, lambda: float(sessions))
    metrics.serving("127.0.0.1:8081")
    for _ in range(ok):
        metrics.answered("SendMessage", Code.OK, 0.002)
        metrics.messages.labels("NORMAL").inc()
    for _ in range(failed):
        metrics.answered("QueryRoute", Code.TOPIC_NOT_FOUND, 0.001)
    return generate_latest(registry).decode()


def test_a_proxy_s_state_is_read_from_its_metrics() -> None:
    state = read_metrics("127.0.0.1:9090", "ready", metrics_of_a_proxy_that_served(5, 2, 3))
    assert state.ready
    assert state.endpoint == "127.0.0.1:8081"
    assert (state.sessions, state.rpcs, state.failed, state.messages) == (3, 7, 2, 5)


def test_metrics_without_the_proxy_s_info_are_not_a_proxy() -> None:
    state = read_metrics("127.0.0.1:9090", "ready", "# TYPE up gauge\nup 1\n")
    assert not state.ready
    assert "not a proxy" in state.status


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_proxy_that_does_not_answer_is_shown_unreachable_not_raised() -> None:
    address = f"127.0.0.1:{free_port()}"
    state = probe(address, 1.0)
    assert state.address == address
    assert state.status.startswith("unreachable: ")
    assert not state.ready


def test_no_proxies_given_probes_nothing() -> None:
    assert probe_all((), 1.0) == []
