"""The command line without Kafka: help, version, and bad options refused with a clear line."""

from __future__ import annotations

import socket

import pytest
from click.testing import CliRunner

from adapter import __version__
from adapter.ops.cli import main, plural

pytestmark = pytest.mark.timeout(30)


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def test_the_version_is_printed() -> None:
    code, output = invoke("--version")
    assert code == 0
    assert __version__ in output


def test_help_names_the_environment_variable_of_each_option() -> None:
    code, output = invoke("worker", "all", "--help")
    assert code == 0
    for name in (
        "RMQ_ADAPTER_BOOTSTRAP",
        "RMQ_ADAPTER_WORKER_ID",
        "RMQ_ADAPTER_METRICS_HOST",
        "RMQ_ADAPTER_METRICS_PORT",
        "RMQ_ADAPTER_CHECK_INTERVAL_MS",
        "RMQ_ADAPTER_DELAY_LEVELS",
    ):
        assert name in output.replace("\n", "").replace(" ", ""), name


def test_an_unknown_log_level_is_refused_with_the_choices() -> None:
    code, output = invoke("--log-level", "LOUD", "status", "--bootstrap", "127.0.0.1:1")
    assert code == 2
    assert "'LOUD' is not one of" in output
    assert "Traceback" not in output


@pytest.mark.parametrize("value", ["0", "-3"])
def test_zero_or_negative_half_partitions_are_refused(value: str) -> None:
    code, output = invoke(
        "topics", "init", "--bootstrap", "127.0.0.1:1", "--half-partitions", value
    )
    assert code == 2
    assert "--half-partitions" in output


def test_counts_read_as_english() -> None:
    assert plural(1, "partition") == "1 partition"
    assert plural(8, "partition") == "8 partitions"
    assert plural(0, "partition") == "0 partitions"


def test_a_command_refuses_a_setting_exactly_once_depends_on_in_one_line() -> None:
    result = CliRunner().invoke(
        main,
        ["status", "--bootstrap", "127.0.0.1:1", "--timeout", "1"],
        env={"RMQ_ADAPTER_KAFKA_ENABLE_AUTO_COMMIT": "true"},
    )
    assert result.exit_code == 1
    [line] = result.output.strip().splitlines()
    assert line.startswith("Error: RMQ_ADAPTER_KAFKA_ENABLE_AUTO_COMMIT would override")


def test_a_taken_metrics_port_is_one_line_naming_it() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = CliRunner().invoke(
            main,
            ["worker", "transactions", "--bootstrap", "127.0.0.1:1", "--metrics-port", str(port)],
        )
    assert result.exit_code == 1
    [line] = result.output.strip().splitlines()
    assert line.startswith(f"Error: the metrics port 127.0.0.1:{port} is taken"), line
    assert "--metrics-port" in line
