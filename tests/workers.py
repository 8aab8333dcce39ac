"""Adapter workers (or test helper programs) run as a process or in a container, to be killed.

``start_worker(kind, module, *args)`` runs ``python -m module args`` either as a child process
or in the worker image built by ``infra/images.sh`` (the adapter installed from its wheel, the
checkout's ``tests/`` mounted read-only at /app/tests, on the host network so it reaches the
broker at the same address). Paths under the test's tmp
directory are mounted at the same path, so both kinds read and write the same files.

Fault injection: ``kill()`` sends SIGKILL (to the process, or to the container's main process),
``terminate()`` sends SIGTERM for a clean stop, ``pause()``/``resume()`` freeze and thaw a
process (SIGSTOP/SIGCONT).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from tests.brokers import ROOT, TEST_LABEL, built_image, chosen_path


class Worker(Protocol):
    def wait_for_output(self, line: str, timeout: float = 60.0) -> None:
        """Wait until the worker prints a line containing ``line``."""

    def kill(self) -> None: ...
    def terminate(self, timeout: float = 30.0) -> int: ...


def worker_kinds() -> list[str]:
    """Where workers can run on this machine: always a process, a container with an engine."""
    return ["process", "container"] if chosen_path() == "testcontainers" else ["process"]


STARTED: list[ProcessWorker] = []
"""Every worker process the suite started; the session kills those still alive at its end."""


def kill_leftovers() -> None:
    for worker in STARTED:
        if worker.process.poll() is None:
            worker.kill()


class ProcessWorker:
    """A child process whose output is drained on a thread (a full pipe would block it) and
    kept, so that ``wait_for_output`` sees every line printed since the start."""

    def __init__(self, module: str, *args: str, env: Mapping[str, str] | None = None) -> None:
        self.process = subprocess.Popen(  # noqa: S603 - fixed argv
            [sys.executable, "-m", module, *args],
            cwd=ROOT,
            env={**os.environ, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,  # kept with the rest: nothing reaches the terminal
            text=True,
        )
        self.lines: list[str] = []
        STARTED.append(self)
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line)

    def wait_for_output(self, line: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(line in got for got in list(self.lines)):
                return
            if self.process.poll() is not None and not self._drainer.is_alive():
                tail = "".join(self.lines[-20:])
                raise AssertionError(f"the worker exited with {self.process.returncode}:\n{tail}")
            time.sleep(0.05)
        raise AssertionError(f"the worker did not print {line!r} within {timeout} s")

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def pause(self) -> None:
        """Freeze it (SIGSTOP), as a stalled VM or a long GC pause does: it keeps its sockets
        and its state, and does nothing, heartbeats included."""
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def printed_since(self, start: int, line: str) -> bool:
        """Whether a line containing ``line`` was printed after the first ``start`` lines."""
        return any(line in got for got in list(self.lines)[start:])

    def freeze_past_session(self, seconds: float, lost: str) -> int:
        """Freeze it for ``seconds`` (past its session), thaw it, and wait until it prints
        ``lost`` (it learnt it lost its partitions); how many lines it had printed then."""
        before = len(self.lines)
        self.pause()
        time.sleep(seconds)
        self.resume()
        deadline = time.monotonic() + 60
        while not self.printed_since(before, lost):
            if time.monotonic() > deadline:
                raise AssertionError(f"the thawed worker did not print {lost!r} within 60 s")
            time.sleep(0.1)
        return len(self.lines)

    def wait(self, timeout: float) -> int:
        """The exit code, once the worker ends by itself (burst mode); its output is then
        all in ``lines``."""
        code = self.process.wait(timeout)
        self._drainer.join(10)
        return code

    def terminate(self, timeout: float = 30.0) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)


class ContainerWorker:
    def __init__(self, module: str, *args: str, mounts: tuple[Path, ...] = ()) -> None:
        from testcontainers.core.container import DockerContainer

        image = built_image("rmq-worker")
        assert image, "no worker image: run infra/images.sh (make test does)"
        self.container = (
            DockerContainer(image)
            .with_command(["python", "-m", module, *args])
            .with_volume_mapping(str(ROOT / "tests"), "/app/tests", "ro")
            .with_kwargs(network_mode="host", labels={TEST_LABEL: "worker"})
        )
        for path in mounts:
            self.container.with_volume_mapping(str(path), str(path), "rw")
        self.container.start()

    def wait_for_output(self, line: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            stdout, _ = self.container.get_logs()
            if line in stdout.decode(errors="replace"):
                return
            wrapped = self.container.get_wrapped_container()
            wrapped.reload()
            if wrapped.status == "exited":
                raise AssertionError(f"the worker container exited: {self.container.get_logs()}")
            time.sleep(0.2)
        raise AssertionError(f"the worker container did not print {line!r} within {timeout} s")

    def kill(self) -> None:
        self.container.get_wrapped_container().kill(signal="SIGKILL")
        self.container.get_wrapped_container().wait(timeout=30)
        self.remove()

    def terminate(self, timeout: float = 30.0) -> int:
        wrapped = self.container.get_wrapped_container()
        wrapped.kill(signal="SIGTERM")
        status = int(wrapped.wait(timeout=timeout)["StatusCode"])
        self.remove()
        return status

    def remove(self) -> None:
        with contextlib.suppress(Exception):
            self.container.get_wrapped_container().remove(force=True)


def start_worker(
    kind: str,
    module: str,
    *args: str,
    mounts: tuple[Path, ...] = (),
    env: Mapping[str, str] | None = None,
) -> ProcessWorker | ContainerWorker:
    """A worker as a process (with ``env`` added to this one's) or in a container."""
    if kind == "process":
        return ProcessWorker(module, *args, env=env)
    if kind == "container":
        return ContainerWorker(module, *args, mounts=mounts)
    raise ValueError(f"unknown worker kind {kind!r}")


def start_schedule_forwarder(bootstrap: str, worker_id: str) -> ProcessWorker | ContainerWorker:
    """``rmq-adapter worker schedule`` in a process of its own (SIGKILL it with ``kill()``),
    once it says it started."""
    worker = start_worker(
        "process",
        *("adapter", "worker", "schedule", "--bootstrap", bootstrap),
        *("--worker-id", worker_id),
    )
    worker.wait_for_output("schedule forwarder")
    return worker
