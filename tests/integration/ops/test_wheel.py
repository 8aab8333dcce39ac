"""The package as a user installs it: a wheel, into a fresh venv outside the checkout, and the
README's quick start run from there (broker, topics, worker, a transactional and a delayed send,
both received)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapter.ops import broker
from tests import maven
from tests.brokers import ROOT

pytestmark = pytest.mark.timeout(240)

SUBPACKAGES = [
    "adapter.client",
    "adapter.exceptions",
    "adapter.wire.codec",
    "adapter.kafka.worker",
    "adapter.producer.producer",
    "adapter.consumer.push_consumer",
    "adapter.transaction.coordinator",
    "adapter.schedule.forwarder",
    "adapter.ops.cli",
]
QUICK_START = [
    "rmq-adapter broker start --data-dir",
    "rmq-adapter topics init",
    "rmq-adapter topics create Orders --direct-commit",
    "rmq-adapter worker all",
    "python quickstart.py",
    "rmq-adapter status",
    "rmq-adapter transactions list",
    "rmq-adapter broker stop --data-dir",
]
"""The quick start's command lines, as the README has them (the test runs each)."""


def run(
    argv: list[str | Path], *, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{argv} failed:\n{done.stdout}\n{done.stderr}"
    return done


def readme_quick_start() -> tuple[str, str]:
    """The README's quick start: its shell block and ``quickstart.py``."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Quick start, from the wheel", 1)[1].split("\n## ", 1)[0]
    shell, python = re.findall(r"```(?:python)?\n(.*?)```", section, re.S)
    assert python.startswith("# quickstart.py\n")
    return shell, python


@pytest.fixture
def installed(tmp_path: Path) -> Path:
    """A venv outside the checkout with the wheel built from the checkout's sources; its bin."""
    sources = tmp_path / "src"
    sources.mkdir()
    # The package's files only: a stale build/ of the checkout must not reach the wheel.
    shutil.copytree(
        ROOT / "adapter", sources / "adapter", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, sources / name)
    run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp_path, sources],
        cwd=tmp_path,
    )
    [wheel] = tmp_path.glob("rmq_kafka_adapter-*.whl")
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", venv], cwd=tmp_path)
    pip = run([venv / "bin" / "pip", "install", "--quiet", wheel], cwd=tmp_path)
    assert "Deprecat" not in pip.stdout + pip.stderr
    return venv / "bin"


@pytest.fixture
def home(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A working directory outside the checkout and a user's environment: no RMQ_ADAPTER_*
    setting, an empty jar cache, and a Maven repository on 127.0.0.1 holding the pinned jars."""
    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMQ_ADAPTER_")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    env.pop("PYTHONPATH", None)
    fetched = ROOT / "infra" / ".jars" / "kafka"
    with maven.mirror(broker.jar_lock(), fetched, tmp_path / "maven") as url:
        env["RMQ_ADAPTER_MAVEN_REPOSITORY"] = url
        yield work, env


@pytest.mark.long  # a minute: a wheel built, a venv made, a broker started
def test_the_wheel_installs_into_a_fresh_venv_and_runs_the_readmes_quick_start(
    installed: Path, home: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    work, env = home
    shell, quickstart = readme_quick_start()
    for command in QUICK_START:
        assert command in shell, f"the README's quick start no longer says {command!r}"

    probe = "; ".join(
        [
            *(f"import {name}" for name in SUBPACKAGES),
            "from adapter.wire import codec",
            "codec.fingerprint(codec.RECORD_TYPES[0])",  # the schemas are package data
            "import adapter",
            "print(adapter.__file__)",
        ]
    )
    where = run([installed / "python", "-c", probe], cwd=work, env=env).stdout
    assert str(installed.parent) in where, "imported from the installed wheel, not the checkout"

    cli = installed / "rmq-adapter"
    data = tmp_path / "broker"
    port = broker.free_port_pair()
    started = run([cli, "broker", "start", "--data-dir", data, "--port", port], cwd=work, env=env)
    worker = None
    try:
        address = started.stdout.strip()
        assert address == f"127.0.0.1:{port}", started.stdout
        assert "fetching the Kafka broker's jars (kafka-4.3.1) (46 jars" in started.stderr
        assert "(100 %)" in started.stderr, "the fetch shows its progress"
        assert (tmp_path / "cache" / "rmq-adapter" / "jars" / "kafka-4.3.1" / ".complete").exists()
        env["RMQ_ADAPTER_BOOTSTRAP"] = address
        initialised = run([cli, "topics", "init"], cwd=work, env=env).stdout
        assert "RMQ_SYS_TRANS_HALF_TOPIC (8 partitions" in initialised
        create = [cli, "topics", "create", "Orders", "--direct-commit"]
        created = run(create, cwd=work, env=env).stdout
        assert created.startswith("created  Orders (4 partitions")
        worker = subprocess.Popen(  # noqa: S603 - the installed command
            [cli, "--log-level", "WARNING", "worker", "all"], cwd=work, env=env
        )
        (work / "quickstart.py").write_text(quickstart)
        app = run([installed / "python", "quickstart.py"], cwd=work, env=env, timeout=90)
        assert "received 'order 1 is paid', tags Paid" in app.stdout, app.stdout
        assert "received 'please rate order 1', tags Reminder" in app.stdout, app.stdout
        status = run([cli, "status"], cwd=work, env=env).stdout
        [group] = [line.split() for line in status.splitlines() if "GID_quickstart" in line]
        assert group[1:] == ["0", "0"], "nothing waits to be retried, no dead letter"
        listed = run([cli, "transactions", "list"], cwd=work, env=env).stdout
        assert "(none)" in listed, "the transaction was committed, nothing is pending"
    finally:
        if worker is not None:
            worker.send_signal(signal.SIGTERM)
            assert worker.wait(60) == 0, "the workers stop cleanly on SIGTERM"
        stopped = run([cli, "broker", "stop", "--data-dir", data], cwd=work, env=env)
    assert "stopped the broker" in stopped.stdout
