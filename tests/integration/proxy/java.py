"""The official RocketMQ 5.x Java client's programs (``tests/java``), built with Maven and run
as processes: ``mvn -o`` first (the jars are in ~/.m2 after the first build), online once if
that fails (the first build on a machine downloads them from Maven Central)."""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

from tests.brokers import ROOT

MODULE = ROOT / "tests" / "java"
BUILT = ROOT / "build" / "java-proxy-tests"
MAIN = "rmq.adapter.proxytests.ProxyClient"


@functools.cache
def build() -> str:
    """Build the module (if its sources changed), once per test process; the classpath to run
    it with. One build at a time on the machine (the suite's workers share the directory)."""
    mvn = shutil.which("mvn")
    assert mvn, "Maven (mvn) is needed to build tests/java"
    command = [mvn, "-q", "-B", "-Dstyle.color=never", "-f", str(MODULE / "pom.xml"), "package"]
    BUILT.parent.mkdir(parents=True, exist_ok=True)
    with open(BUILT.parent / ".java-proxy-tests.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run([*command[:1], "-o", *command[1:]], capture_output=True, text=True)
        if done.returncode != 0:  # not all jars cached yet: fetch them from Maven Central
            done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"mvn package failed:\n{done.stdout}\n{done.stderr}"
    return f"{BUILT / 'classes'}{os.pathsep}{BUILT / 'lib'}/*"


class JavaProgram:
    """One scenario of ``ProxyClient`` running; its output kept line by line."""

    def __init__(
        self, classpath: str, home: Path, *args: str, env: dict[str, str] | None = None
    ) -> None:
        java = shutil.which("java")
        assert java, "Java 17 is needed to run the official Java client"
        self.process = subprocess.Popen(  # noqa: S603 - fixed argv
            [java, f"-Duser.home={home}", "-cp", classpath, MAIN, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **(env or {})},
        )
        self.lines: list[str] = []
        self._drainer = threading.Thread(target=self._drain, daemon=True)
        self._drainer.start()

    def _drain(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def words(self, first: str) -> list[list[str]]:
        """The lines that start with ``first`` (one word or more), split after it."""
        prefix = first + " "
        return [line[len(prefix) :].split() for line in list(self.lines) if line.startswith(prefix)]

    def wait_for(self, first: str, count: int, timeout: float) -> list[list[str]]:
        deadline = time.monotonic() + timeout
        while len(found := self.words(first)) < count:
            assert self.process.poll() is None or len(self.words(first)) >= count, self.output()
            assert time.monotonic() < deadline, f"no {count} x {first}:\n{self.output()}"
            time.sleep(0.1)
        return found

    def wait(self, timeout: float = 120) -> int:
        """The exit code, once the program ended by itself; its output is then all read."""
        code = self.process.wait(timeout)
        self._drainer.join(5)
        return code

    def finish(self, timeout: float = 120) -> str:
        try:
            code = self.process.wait(timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
        self._drainer.join(5)
        assert code == 0, self.output()
        assert "DONE" in self.lines, self.output()
        return self.output()

    def output(self) -> str:
        return "\n".join(self.lines)
