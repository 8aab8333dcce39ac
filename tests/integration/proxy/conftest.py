"""Factories for the proxy's integration tests: ``rmq-adapter proxy`` processes on the test
broker, and a topic to send to through them."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass

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


@pytest.fixture
def start_proxy(system_topics: str) -> Iterator[StartProxy]:
    """Factory: ``start_proxy(*options, listen="127.0.0.1:0", env=None)``, an ``rmq-adapter
    proxy`` process on the test broker, serving once this returns; stopped (SIGTERM, exit 0
    expected) after the test unless the test stopped or killed it."""
    started: list[RunningProxy] = []

    def start(
        *options: str, listen: str = "127.0.0.1:0", env: dict[str, str] | None = None
    ) -> RunningProxy:
        worker = ProcessWorker(
            "adapter",
            *("proxy", "--bootstrap", system_topics, "--listen", listen),
            *("--metrics-port", "0", "--stop-timeout", "10", *options),
            env=env,
        )
        worker.wait_for_output("proxy serving", timeout=60)
        host, port = _found(worker, SERVING)
        metrics_host, metrics_port = _found(worker, METRICS)
        proxy = RunningProxy(worker, f"{host}:{port}", f"http://{metrics_host}:{metrics_port}")
        started.append(proxy)
        return proxy

    yield start
    for proxy in started:
        if proxy.worker.process.poll() is None:
            code = proxy.terminate()
            assert code == 0, f"the proxy exited with {code}:\n{proxy.output()[-3000:]}"


@pytest.fixture
def proxy(start_proxy: StartProxy) -> RunningProxy:
    """One proxy with the default options."""
    return start_proxy()
