"""Factories for the proxy's integration tests: ``rmq-adapter proxy`` processes on the test
broker, and a topic to send to through them."""

from __future__ import annotations

import contextlib
import re
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
import pytest

from tests.workers import ProcessWorker

SERVING = re.compile(r"proxy serving .* on ([0-9.]+):(\d+),")
METRICS = re.compile(r"metrics and probes on http://([0-9.]+):(\d+)/")


@dataclass
class RunningProxy:
    """A proxy process, where it listens, and its metrics endpoint."""

    worker: ProcessWorker
    endpoint: str
    metrics: str

    def output(self) -> str:
        return "".join(self.worker.lines)

    def scrape(self, path: str = "/metrics") -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.metrics + path, timeout=10) as page:  # noqa: S310
                return page.status, page.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def terminate(self, timeout: float = 60) -> int:
        return self.worker.terminate(timeout)

    def kill(self) -> None:
        self.worker.kill()


def _found(worker: ProcessWorker, pattern: re.Pattern[str]) -> tuple[str, str]:
    for line in list(worker.lines):
        match = pattern.search(line)
        if match:
            return match.group(1), match.group(2)
    raise AssertionError(f"no {pattern.pattern!r} in the proxy's output")


StartProxy = Callable[..., RunningProxy]


@pytest.fixture(autouse=True)
def client_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The official 5.x Python client writes its log under ``~/logs`` when first imported:
    under a scratch home here, not the user's."""
    monkeypatch.setenv("HOME", str(tmp_path_factory.getbasetemp() / "client-home"))


def launch(
    bootstrap: str, *options: str, listen: str = "127.0.0.1:0", env: dict[str, str] | None = None
) -> RunningProxy:
    """An ``rmq-adapter proxy`` process on ``bootstrap``, serving once this returns."""
    worker = ProcessWorker(
        "adapter",
        *("proxy", "--bootstrap", bootstrap, "--listen", listen),
        *("--metrics-port", "0", "--stop-timeout", "10", *options),
        env=env,
    )
    worker.wait_for_output("proxy serving", timeout=60)
    host, port = _found(worker, SERVING)
    metrics_host, metrics_port = _found(worker, METRICS)
    return RunningProxy(worker, f"{host}:{port}", f"http://{metrics_host}:{metrics_port}")


def stop_cleanly(proxies: list[RunningProxy]) -> None:
    """SIGTERM to those still running; each must exit 0."""
    for proxy in proxies:
        if proxy.worker.process.poll() is None:
            code = proxy.terminate()
            assert code == 0, f"the proxy exited with {code}:\n{proxy.output()[-3000:]}"


@pytest.fixture
def start_proxy(system_topics: str) -> Iterator[StartProxy]:
    """Factory: ``start_proxy(*options, listen="127.0.0.1:0", env=None)``, an ``rmq-adapter
    proxy`` process on the test broker, serving once this returns; stopped (SIGTERM, exit 0
    expected) after the test unless the test stopped or killed it."""
    started: list[RunningProxy] = []

    def start(*options: str, **kwargs: Any) -> RunningProxy:
        started.append(launch(system_topics, *options, **kwargs))
        return started[-1]

    yield start
    stop_cleanly(started)


@pytest.fixture(scope="module")
def proxy(system_topics: str) -> Iterator[RunningProxy]:
    """One proxy with the default options, shared by a module's tests."""
    started = [launch(system_topics)]
    yield started[0]
    stop_cleanly(started)


@contextlib.contextmanager
def stub_of(endpoint: str, metadata: dict[str, str] | None = None) -> Iterator[Any]:
    """A raw ``MessagingService`` stub on ``endpoint`` (plaintext), for requests no client
    would send; ``metadata`` goes with every call."""
    from adapter.proxy.protocol import service_grpc

    with grpc.insecure_channel(endpoint) as channel:
        if metadata:
            channel = grpc.intercept_channel(channel, _Metadata(metadata))
        yield service_grpc.MessagingServiceStub(channel)


class _Metadata(grpc.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    def __init__(self, metadata: dict[str, str]) -> None:
        self._metadata = list(metadata.items())

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        details = details._replace(metadata=[*(details.metadata or []), *self._metadata])
        return continuation(details, request)


def proto_message(
    topic: str, body: bytes = b"hello", kind: int = 1, message_id: str | None = None, **system: Any
) -> Any:
    """A protocol ``Message`` as a 5.x client builds it (a fresh message id)."""
    from adapter.msgid import new_message_id
    from adapter.proxy.protocol import definition

    props = definition.SystemProperties(
        message_id=new_message_id() if message_id is None else message_id,
        message_type=kind,
        **system,
    )
    return definition.Message(
        topic=definition.Resource(name=topic), system_properties=props, body=body
    )
