"""Running adapter workers in the foreground: metrics endpoint, SIGTERM, several in one process.

Not a RocketMQ behaviour: RocketMQ's broker runs its schedule and check services as threads of
one process; ``rmq-adapter worker all`` does the same with the forwarder and the coordinator,
which share one Prometheus registry. A worker that fails stops the others, and the process
exits with an error, so a supervisor restarts it rather than leaving half a broker running.

Known gaps: none.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol

from prometheus_client import CollectorRegistry, start_http_server

from adapter.config import CoordinatorConfig, ForwarderConfig
from adapter.exceptions import AdapterError

log = logging.getLogger("adapter.workers")


class Worker(Protocol):
    def run(self) -> None: ...

    def stop(self) -> None: ...


def forwarder(config: ForwarderConfig, registry: CollectorRegistry | None = None) -> list[Worker]:
    from adapter.schedule.forwarder import ScheduleForwarder

    return [ScheduleForwarder(config, registry)]


def coordinator(
    config: CoordinatorConfig, registry: CollectorRegistry | None = None
) -> list[Worker]:
    from adapter.transaction.coordinator import TransactionCoordinator

    return [TransactionCoordinator(config, registry)]


def all_workers(
    forwarder_config: ForwarderConfig,
    coordinator_config: CoordinatorConfig,
    registry: CollectorRegistry | None = None,
) -> list[Worker]:
    shared = registry or CollectorRegistry()
    return forwarder(forwarder_config, shared) + coordinator(coordinator_config, shared)


def run_in_foreground(
    workers: list[Worker],
    metrics_port: int | None,
    install_signals: Callable[[Callable[[], None]], None],
) -> None:
    """Run ``workers`` until SIGTERM; raise if one of them failed."""

    def stop_all() -> None:
        for worker in workers:
            worker.stop()

    if metrics_port is not None:
        registry: CollectorRegistry = getattr(workers[0], "registry")  # noqa: B009
        start_http_server(metrics_port, addr="127.0.0.1", registry=registry)
    install_signals(stop_all)
    if len(workers) == 1:
        workers[0].run()
        return
    failures: list[BaseException] = []

    def run(worker: Worker) -> None:
        try:
            worker.run()
        except BaseException as exc:
            log.exception("worker %s failed; stopping the others", type(worker).__name__)
            failures.append(exc)
            stop_all()

    threads = [
        threading.Thread(target=run, args=(w,), name=type(w).__name__, daemon=True) for w in workers
    ]
    for thread in threads:
        thread.start()
    while any(t.is_alive() for t in threads):
        for thread in threads:
            thread.join(0.2)  # short joins, so the main thread still sees SIGTERM
    if failures:
        raise AdapterError(f"a worker failed: {failures[0]}") from failures[0]
