"""The metrics and probes endpoint under load: a bounded number of connection threads, and idle
connections dropped after a deadline, so a scraper or a port scan cannot exhaust the worker."""

from __future__ import annotations

import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator

import pytest
from prometheus_client import CollectorRegistry

from adapter.ops import workers
from tests.support import wait_until

pytestmark = pytest.mark.timeout(60)

Probes = Callable[[workers.ProbeLimits], workers.ProbeServer]


@pytest.fixture
def probes() -> Iterator[Callable[[workers.ProbeLimits], workers.ProbeServer]]:
    """Factory: the endpoint, with no worker, within the given limits."""
    servers: list[workers.ProbeServer] = []

    def serve(limits: workers.ProbeLimits) -> workers.ProbeServer:
        server = workers.serve_probes(
            workers.Endpoint("127.0.0.1", 0), [], CollectorRegistry(), limits=limits
        )
        servers.append(server)
        return server

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


def idle_connections(port: int, count: int) -> list[socket.socket]:
    return [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(count)]


def test_idle_connections_take_at_most_the_limit_of_threads(probes: Probes) -> None:
    server = probes(workers.ProbeLimits(connections=4, idle_s=30))
    held = idle_connections(server.server_port, 20)
    try:
        wait_until(lambda: serving() >= 4, timeout=10, what="4 threads")
        assert serving() == 4, "one thread per connection, at most 4"
        wait_until(
            lambda: sum(closed_by_server(sock) for sock in held) == 16,
            timeout=10,
            what="the connections over the limit closed at once",
        )
        assert serving() == 4
    finally:
        for sock in held:
            sock.close()


def test_an_idle_connection_is_dropped_and_the_endpoint_answers_again(probes: Probes) -> None:
    server = probes(workers.ProbeLimits(connections=4, idle_s=0.5))
    held = idle_connections(server.server_port, 4)
    try:
        assert held[0].recv(1) == b"", "the server closed it after 0.5 s of silence"
        url = f"http://127.0.0.1:{server.server_port}/healthz"
        answer = wait_until(lambda: _get(url), timeout=10, what="an answer")
        assert answer == b"ok\n"
    finally:
        for sock in held:
            sock.close()


def serving() -> int:
    """Threads serving a connection of a probe server."""
    return sum("process_request_thread" in t.name for t in threading.enumerate())


def closed_by_server(sock: socket.socket) -> bool:
    sock.settimeout(0.05)
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except TimeoutError:
        return False


def _get(url: str) -> bytes | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - a local URL
            return bytes(response.read())
    except OSError:
        return None


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310 - loopback http
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.parametrize(
    ("path", "status"),
    [("/metrics", 200), ("/healthz", 200), ("/readyz", 200), ("/", 404), ("/admin", 404),
     ("/metrics/x", 404), ("/favicon.ico", 404)],
)  # fmt: skip
def test_only_the_three_paths_answer_and_any_other_is_not_found(
    probes: Probes, path: str, status: int
) -> None:
    server = probes(workers.ProbeLimits())
    assert _status(f"http://127.0.0.1:{server.server_port}{path}") == status
