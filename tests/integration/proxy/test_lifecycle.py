"""``rmq-adapter proxy`` runs like the workers: probes and metrics, and a clean SIGTERM."""

from __future__ import annotations

import queue
import signal
import socket
import time
from typing import Any

import grpc
import pytest

from adapter.proxy.protocol import Code, definition, service, service_grpc
from tests.integration.proxy.conftest import RunningProxy, StartProxy, launch
from tests.support import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]


def heartbeat(endpoint: str) -> int:
    with grpc.insecure_channel(endpoint) as channel:
        stub = service_grpc.MessagingServiceStub(channel)
        request = service.HeartbeatRequest(client_type=definition.ClientType.PRODUCER)
        return int(stub.Heartbeat(request, timeout=10).status.code)


def test_the_proxy_is_healthy_and_ready_once_it_serves(proxy: RunningProxy) -> None:
    assert proxy.scrape("/healthz") == (200, "ok\n")
    wait_until(lambda: proxy.scrape("/readyz")[0] == 200, timeout=30, what="/readyz 200")


def test_rpcs_are_counted_by_method_and_code_with_their_latency(start_proxy: StartProxy) -> None:
    proxy = start_proxy()
    assert heartbeat(proxy.endpoint) == Code.OK
    _, text = proxy.scrape()
    assert 'rmq_proxy_rpcs_total{code="OK",method="Heartbeat"} 1.0' in text
    assert 'rmq_proxy_rpc_seconds_count{method="Heartbeat"} 1.0' in text


def test_sigterm_stops_the_proxy_cleanly_and_frees_its_port(start_proxy: StartProxy) -> None:
    proxy = start_proxy()
    assert heartbeat(proxy.endpoint) == Code.OK
    assert proxy.terminate() == 0
    assert "proxy stopped" in proxy.output()
    with pytest.raises(grpc.RpcError):
        heartbeat(proxy.endpoint)


def test_a_taken_port_is_a_clear_error(proxy: RunningProxy, start_proxy: StartProxy) -> None:
    with pytest.raises(AssertionError, match="exited with 1"):
        start_proxy(listen=proxy.endpoint)


def test_sigterm_ends_the_client_sessions_and_does_not_wait_out_the_stop_timeout(
    start_proxy: StartProxy,
) -> None:
    proxy = start_proxy()
    settings = definition.Settings(client_type=definition.ClientType.PRODUCER)
    outgoing: queue.Queue[Any] = queue.Queue()
    outgoing.put(service.TelemetryCommand(settings=settings))
    with grpc.insecure_channel(proxy.endpoint) as channel:
        stream = channel.stream_stream(
            "/apache.rocketmq.v2.MessagingService/Telemetry",
            request_serializer=service.TelemetryCommand.SerializeToString,
            response_deserializer=service.TelemetryCommand.FromString,
        )
        answers = stream(iter(outgoing.get, None), timeout=60)
        assert next(answers).status.code == Code.OK
        started = time.monotonic()
        proxy.worker.process.send_signal(signal.SIGTERM)
        rest, how = [], grpc.StatusCode.OK
        try:
            rest = list(answers)
        except grpc.RpcError as ended:  # or ended by the server going away: the same to a client
            how = ended.code()
        assert rest == [], "the stream ends, the client reconnects elsewhere"
        assert how in (grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
        assert proxy.worker.process.wait(30) == 0
        outgoing.put(None)
    assert time.monotonic() - started < 5, "not the 10 s stop timeout"


def test_a_stop_during_a_kafka_outage_ends_the_process_with_its_last_line() -> None:
    """A Kafka that accepts connections and never answers: the proxy's first probe of it is in
    flight when SIGTERM comes. The process exits 0 with "proxy stopped" as its last line, and
    nothing (no late "does not answer") after it."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        proxy = launch(f"127.0.0.1:{silent.getsockname()[1]}")
        started = time.monotonic()
        proxy.worker.process.send_signal(signal.SIGTERM)
        try:
            assert proxy.worker.process.wait(30) == 0
        finally:
            if proxy.worker.process.poll() is None:
                proxy.kill()
        took = time.monotonic() - started
    lines = [line for line in proxy.output().splitlines() if line.strip()]
    assert "proxy stopped" in lines[-1], "\n".join(lines[-5:])
    assert took < 10, "within the stop timeout, not stuck on Kafka"
