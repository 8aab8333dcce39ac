"""The proxy's Prometheus metrics: RPCs by method and status code, and their latency.

Reproduces the request metrics of RocketMQ's proxy (``rocketmq_rpc_latency`` by protocol,
method and response code) as ``rmq_proxy_rpcs_total{method,code}`` and
``rmq_proxy_rpc_seconds{method}``, plus the live Telemetry sessions and the check-backs
handed to clients, and ``rmq_proxy_info{endpoint}``: the address clients call (the console's
overview shows it). Labels never carry an access key or anything a client sent but the method.

Known gaps: none.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from adapter.proxy.codes import code_name

__all__ = ["ProxyMetrics"]

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)


class ProxyMetrics:
    def __init__(self, registry: CollectorRegistry, sessions: Callable[[], float]) -> None:
        self.rpcs = Counter(
            "rmq_proxy_rpcs",
            "RPCs answered, by method and RocketMQ status code.",
            ["method", "code"],
            registry=registry,
        )
        self.latency = Histogram(
            "rmq_proxy_rpc_seconds",
            "Time to answer an RPC (a Telemetry stream: its lifetime is not counted).",
            ["method"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.sessions = Gauge(
            "rmq_proxy_sessions", "Live Telemetry streams (client sessions).", registry=registry
        )
        self.sessions.set_function(sessions)
        self.checks = Counter(
            "rmq_proxy_checks",
            "Transaction check-backs, by outcome: sent to a client, or no client of the group.",
            ["outcome"],
            registry=registry,
        )
        self.messages = Counter(
            "rmq_proxy_messages",
            "Messages sent to Kafka, by message type.",
            ["type"],
            registry=registry,
        )

        self.info = Info("rmq_proxy", "Where this proxy serves clients.", registry=registry)

    def serving(self, endpoint: str) -> None:
        self.info.info({"endpoint": endpoint})

    def answered(self, method: str, code: int, seconds: float) -> None:
        self.rpcs.labels(method, code_name(code)).inc()
        self.latency.labels(method).observe(seconds)
