"""The adapter's workers of a chaos run: two transaction coordinators and two schedule
forwarders, each a process the nemesis may SIGKILL (and replace), freeze (and thaw), or whose
wall clock it may set off (``tests.chaos.skewed_worker``) and back."""

from __future__ import annotations

import contextlib
import itertools
import logging
import random
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from tests.workers import ProcessWorker

log = logging.getLogger("chaos")

KINDS = {"coordinator": "transactions", "forwarder": "schedule"}
STARTED_LINE = {"coordinator": "transaction coordinator", "forwarder": "schedule forwarder"}


class Workers:
    def __init__(self, bootstrap: str, env: Mapping[str, str], per_kind: int = 2) -> None:
        self._bootstrap = bootstrap
        self._env = dict(env)
        self._serial = itertools.count(1)
        self.running: dict[str, ProcessWorker] = {}
        self.started: dict[str, ProcessWorker] = {}
        """Every worker of the run, the killed ones too: their output is kept (:meth:`save`)."""
        self._killed: list[str] = []
        self._paused: set[str] = set()
        self._skews = Path(tempfile.mkdtemp(prefix="chaos-skew-"))
        try:
            for kind in KINDS:
                for _ in range(per_kind):
                    self._start(kind)
        except BaseException:
            self.stop()
            raise

    def _start(self, kind: str) -> str:
        name = f"{kind}-{next(self._serial)}"
        worker = self.running[name] = self.started[name] = ProcessWorker(
            "tests.chaos.skewed_worker",
            str(self._skews / name),
            *("--log-level", "INFO", "worker", KINDS[kind], "--bootstrap", self._bootstrap),
            *("--worker-id", f"chaos-{name}"),
            *(("--transaction-timeout-ms", "2000", "--check-interval-ms", "1000")
              if kind == "coordinator" else ()),
            env=self._env,
        )  # fmt: skip
        worker.wait_for_output(STARTED_LINE[kind], timeout=120)
        return name

    def kill_one(self, rng: random.Random) -> str:
        name = rng.choice(sorted(set(self.running) - self._paused))
        self.running.pop(name).kill()
        self._killed.append(name)
        return name

    def replace_killed(self) -> None:
        """A new worker (a new id) for each one killed."""
        while self._killed:
            killed = self._killed.pop()
            self._start(killed.rsplit("-", 1)[0])

    def pause_one(self, rng: random.Random) -> str:
        name = rng.choice(sorted(set(self.running) - self._paused))
        self.running[name].pause()
        self._paused.add(name)
        return name

    def skew_one(self, rng: random.Random) -> tuple[str, int]:
        """Set a running worker's wall clock off: a coordinator's 2-10 s either way (its
        check-backs come earlier or later), a forwarder's 2-10 s back (its deliveries may be
        late, never early; one ahead delivers early by design: docs/behaviour)."""
        name = rng.choice(sorted(set(self.running) - self._paused))
        skew_ms = rng.randint(2_000, 10_000)
        if name.startswith("forwarder") or rng.random() < 0.5:
            skew_ms = -skew_ms
        (self._skews / name).write_text(str(skew_ms))
        return name, skew_ms

    def unskew_all(self) -> None:
        for path in self._skews.iterdir():
            path.write_text("0")

    def resume_all(self) -> None:
        for name in sorted(self._paused):
            if name in self.running:
                self.running[name].resume()
        self._paused.clear()

    def dead(self) -> list[str]:
        """Workers that exited by themselves (never a fault's doing)."""
        return [name for name, w in self.running.items() if w.process.poll() is not None]

    def stop(self) -> dict[str, int]:
        """SIGTERM every worker; their exit codes (a worker that ignores it is killed)."""
        self.resume_all()
        self.unskew_all()
        codes: dict[str, int] = {}
        for name, worker in self.running.items():
            try:
                codes[name] = worker.terminate(60)
            except Exception:  # noqa: BLE001 - whatever happened, it must not outlive the run
                with contextlib.suppress(Exception):
                    worker.kill()
                codes[name] = -9
        shutil.rmtree(self._skews, ignore_errors=True)
        return codes

    def save(self, directory: Path) -> None:
        """Each worker's output as ``<name>.log`` in ``directory``: what a stall or a failure
        of the run is diagnosed from."""
        directory.mkdir(parents=True, exist_ok=True)
        for name, worker in self.started.items():
            (directory / f"{name}.log").write_text("".join(worker.lines))
