"""The local broker's settings and its PID file, without starting Java."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapter import jars
from adapter.ops import broker, broker_jars

pytestmark = pytest.mark.timeout(30)


def test_the_jars_directory_is_named_apart_from_the_kafka_settings(tmp_path: Path) -> None:
    # RMQ_ADAPTER_KAFKA_* are librdkafka settings; the broker's jars have a name of their own.
    assert broker.ENV_JARS == "RMQ_ADAPTER_BROKER_JARS"
    assert broker.default_jars_dir({"RMQ_ADAPTER_BROKER_JARS": str(tmp_path)}) == tmp_path


def test_the_old_name_of_the_jars_directory_still_works_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert broker.default_jars_dir({"RMQ_ADAPTER_KAFKA_JARS": str(tmp_path)}) == tmp_path
    assert "RMQ_ADAPTER_KAFKA_JARS is deprecated" in caplog.text
    assert "RMQ_ADAPTER_BROKER_JARS" in caplog.text


def test_without_a_setting_the_jars_come_from_the_checkout_else_from_the_user_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert broker.default_jars_dir({}) == broker.repo_root() / "infra" / ".jars" / "kafka"
    monkeypatch.setattr(broker_jars, "repo_root", lambda: tmp_path / "site-packages")
    cache = tmp_path / "cache"
    assert broker.default_jars_dir({"RMQ_ADAPTER_JARS_CACHE": str(cache)}) == cache / "kafka-4.3.1"


def test_the_broker_jars_setting_is_outside_the_librdkafka_prefix() -> None:
    # RMQ_ADAPTER_KAFKA_* would be read as librdkafka settings by every client.
    assert not broker.ENV_JARS.startswith("RMQ_ADAPTER_KAFKA_")
    assert not jars.ENV_CACHE.startswith("RMQ_ADAPTER_KAFKA_")
    assert not jars.ENV_REPOSITORY.startswith("RMQ_ADAPTER_KAFKA_")


@pytest.fixture
def another_process() -> Iterator[subprocess.Popen[bytes]]:
    """A process that is not a broker, whose PID a dead broker's PID file may name."""
    process = subprocess.Popen(["sleep", "60"])
    try:
        yield process
    finally:
        process.kill()
        process.wait(10)


def test_stop_never_signals_a_process_that_reused_the_brokers_pid(
    tmp_path: Path, another_process: subprocess.Popen[bytes]
) -> None:
    (tmp_path / broker.PID_FILE).write_text(str(another_process.pid))
    assert broker.stop(tmp_path, timeout_s=2) is False, "no broker was running"
    assert another_process.poll() is None, "the other process lives"
    assert not (tmp_path / broker.PID_FILE).exists(), "the stale PID file is gone"


def test_a_reused_pid_does_not_make_start_think_a_broker_runs(
    tmp_path: Path, another_process: subprocess.Popen[bytes]
) -> None:
    (tmp_path / broker.PID_FILE).write_text(str(another_process.pid))
    assert broker.running_pid(tmp_path) is None
