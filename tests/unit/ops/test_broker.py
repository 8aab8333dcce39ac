"""The local broker's settings and its PID file, without starting Java."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapter.ops import broker

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


def test_without_a_setting_the_jars_come_from_the_checkout() -> None:
    assert broker.default_jars_dir({}) == broker.repo_root() / "infra" / ".jars" / "kafka"
