"""The package as a user installs it: a wheel, into a fresh venv, without ``-e``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.brokers import ROOT

pytestmark = pytest.mark.timeout(300)

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


def run(argv: list[str | Path], *, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, f"{argv} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def test_the_wheel_installs_into_a_fresh_venv_and_works(tmp_path: Path, system_topics: str) -> None:
    run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", tmp_path, ROOT],
        cwd=tmp_path,
    )
    [wheel] = tmp_path.glob("rmq_kafka_adapter-*.whl")
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", venv], cwd=tmp_path)
    pip_output = run([venv / "bin" / "pip", "install", "--quiet", wheel], cwd=tmp_path)
    assert "Deprecat" not in pip_output, pip_output

    probe = "; ".join(
        [
            *(f"import {name}" for name in SUBPACKAGES),
            "from adapter.wire import codec",
            "codec.fingerprint(codec.RECORD_TYPES[0])",  # the schemas are package data
            "import adapter",
            "print(adapter.__file__)",
        ]
    )
    where = run([venv / "bin" / "python", "-c", probe], cwd=tmp_path)
    assert str(venv) in where, "imported from the installed wheel, not the checkout"

    assert "Usage: rmq-adapter" in run([venv / "bin" / "rmq-adapter", "--help"], cwd=tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RMQ_ADAPTER_")}
    env["RMQ_ADAPTER_BOOTSTRAP"] = system_topics  # the address only in the environment
    output = run([venv / "bin" / "rmq-adapter", "topics", "init"], cwd=tmp_path, env=env)
    assert "RMQ_SYS_TRANS_HALF_TOPIC (8 partitions)" in output
    assert "SCHEDULE_TOPIC_XXXX (23 partitions)" in output
