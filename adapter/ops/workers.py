"""Running adapter workers in the foreground: metrics and probes, SIGTERM, several in one process.

Not a RocketMQ behaviour: RocketMQ's broker runs its schedule and check services as threads of
one process; ``rmq-adapter worker all`` does the same with the forwarder and the coordinator,
which share one Prometheus registry. A worker that fails stops the others, and the process
exits with an error, so a supervisor restarts it rather than leaving half a broker running.
SIGTERM stops every worker in its documented order; if one has not stopped within the stop
timeout (a Kafka call that will not return), the process exits anyway, saying so.

The metrics port serves ``/metrics`` (any other path is 404) and answers ``/healthz`` (200
while every worker's loop has ended a turn in the last two minutes) and ``/readyz`` (200 while
every worker reaches Kafka and has its partitions assigned). It serves at most 8 connections at
once, a thread each, and closes one silent for 10 s (:class:`ProbeLimits`): a port scan or a
stalled scraper cannot pile up threads.

Known gaps: none.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from prometheus_client import CollectorRegistry, make_wsgi_app

from adapter.exceptions import AdapterError
from adapter.kafka.worker import AnyWorker

log = logging.getLogger(__name__)

ALIVE_WITHIN_S = 120.0


@dataclass(frozen=True, slots=True)
class Endpoint:
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class ProbeLimits:
    """How much the endpoint may take: a scraper or a port scan must not exhaust the worker."""

    connections: int = 8
    """Connections served at once, one thread each; more are closed at once."""
    idle_s: float = 10.0
    """A connection silent for this long is closed (a slow or stalled client)."""


class ProbeServer(ThreadingMixIn, WSGIServer):
    """A WSGI server with a thread per connection, up to ``limits.connections`` of them."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], limits: ProbeLimits) -> None:
        self.limits = limits
        self._slots = threading.BoundedSemaphore(limits.connections)
        super().__init__(address, _QuietHandler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # full: the client may try again
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class _QuietHandler(WSGIRequestHandler):
    def setup(self) -> None:
        super().setup()
        if isinstance(self.server, ProbeServer):
            self.connection.settimeout(self.server.limits.idle_s)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass


def probes_app(
    workers: list[AnyWorker], registry: CollectorRegistry
) -> Callable[..., Iterable[bytes]]:
    """``/metrics`` (Prometheus), ``/healthz`` and ``/readyz`` for ``workers``."""
    metrics = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path in ("/healthz", "/readyz"):
            if path == "/healthz":
                failing = [w.name for w in workers if not w.alive(ALIVE_WITHIN_S)]
                what = "loop not alive"
            else:
                failing = [w.name for w in workers if not w.ready()]
                what = "not ready (Kafka unreachable or no assignment yet)"
            status = "503 Service Unavailable" if failing else "200 OK"
            body = (f"{what}: {', '.join(failing)}\n" if failing else "ok\n").encode()
            start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
            return [body]
        if path != "/metrics":
            start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
            return [b"not found: /metrics, /healthz and /readyz are served here\n"]
        return metrics(environ, start_response)  # type: ignore[no-any-return]

    return app


def serve_probes(
    endpoint: Endpoint,
    workers: list[AnyWorker],
    registry: CollectorRegistry,
    *,
    limits: ProbeLimits | None = None,
) -> ProbeServer:
    """Serve ``/metrics``, ``/healthz`` and ``/readyz`` on a thread, within ``limits``;
    :class:`AdapterError` naming the address when it cannot be bound (taken, or not ours)."""
    try:
        server = ProbeServer((endpoint.host, endpoint.port), limits or ProbeLimits())
    except OSError as exc:
        raise AdapterError(
            f"the metrics port {endpoint.host}:{endpoint.port} is taken or cannot be bound "
            f"({exc.strerror or exc}): choose another with --metrics-port "
            "(RMQ_ADAPTER_METRICS_PORT)"
        ) from None
    server.set_app(probes_app(workers, registry))
    threading.Thread(target=server.serve_forever, name="probes", daemon=True).start()
    log.info("metrics and probes on http://%s:%d/", endpoint.host, server.server_port)
    return server


def stop_on_termination(stop: Callable[[], None]) -> None:
    """SIGTERM and SIGINT call ``stop`` (installed by the command line, never by a library)."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop())


def run_in_foreground(
    workers: list[AnyWorker],
    *,
    registry: CollectorRegistry,
    endpoint: Endpoint | None,
    install_signals: Callable[[Callable[[], None]], None],
    stop_timeout_s: float = 30.0,
    burst: bool = False,
) -> None:
    """Run ``workers`` until SIGTERM (or, with ``burst``, until each is idle); raise if one of
    them failed. Past ``stop_timeout_s`` after a stop, exit the process regardless."""
    stop_requested = threading.Event()
    failures: list[Exception] = []

    def stop_all() -> None:
        stop_requested.set()
        for worker in workers:
            worker.stop()

    server = serve_probes(endpoint, workers, registry) if endpoint is not None else None
    install_signals(stop_all)

    def run(worker: AnyWorker) -> None:
        try:
            worker.run(burst=burst)
        except Exception as exc:
            log.exception("%s failed: %s; stopping the others", worker.name, exc)
            failures.append(exc)
            stop_all()

    threads = [threading.Thread(target=run, args=(w,), name=w.name, daemon=True) for w in workers]
    for thread in threads:
        thread.start()
    while any(t.is_alive() for t in threads) and not stop_requested.is_set():
        for thread in threads:
            thread.join(0.2)  # short joins, so the main thread still sees SIGTERM
    stuck = [w.name for w in workers if not w.stop(stop_timeout_s)]
    if server is not None:
        server.shutdown()
    if stuck:
        log.error(
            "%s did not stop within %.0f s (a Kafka call did not return); exiting anyway",
            ", ".join(stuck),
            stop_timeout_s,
        )
        for handler in logging.getLogger().handlers:
            handler.flush()
        sys.stdout.flush()
        os._exit(1)
    if failures:
        raise AdapterError(str(failures[0])) from failures[0]
