"""The driver JVM's standard error becomes Python log records at log4j's levels."""

from __future__ import annotations

import io
import logging

import pytest

from adapter.spark.jvm_log import forward, parse_line


def test_a_log4j_line_keeps_its_level_logger_and_message() -> None:
    line = "02:45:38.274 WARN DAGScheduler: Failed to cancel job group c2f4."
    assert parse_line(line, logging.INFO) == (
        logging.WARNING,
        "DAGScheduler",
        "Failed to cancel job group c2f4.",
    )


def test_an_error_s_trace_lines_keep_the_error_level() -> None:
    level, _, _ = parse_line("02:45:38.274 ERROR MicroBatchExecution: Query failed", 0)
    assert parse_line("\tat org.apache.spark.Foo.bar(Foo.scala:12)", level) == (
        logging.ERROR,
        "",
        "\tat org.apache.spark.Foo.bar(Foo.scala:12)",
    )


def test_the_launcher_s_incubator_notice_is_debug() -> None:
    line = "WARNING: Using incubator modules: jdk.incubator.vector"
    assert parse_line(line, logging.WARNING)[0] == logging.DEBUG


def test_every_line_of_the_stream_is_logged_and_none_printed(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    stream = io.BytesIO(
        b"WARNING: Using incubator modules: jdk.incubator.vector\n"
        b"02:45:38.274 ERROR Executor: Exception in task 0.0\n"
        b"java.lang.IllegalStateException: boom\n"
        b"\n"
        b"02:45:39.001 INFO SparkContext: Running Spark version 4.1.1\n"
    )
    with caplog.at_level(logging.DEBUG, logger="adapter.spark.jvm"):
        forward(stream)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.DEBUG, "WARNING: Using incubator modules: jdk.incubator.vector"),
        (logging.ERROR, "Exception in task 0.0"),
        (logging.ERROR, "java.lang.IllegalStateException: boom"),
        (logging.INFO, "Running Spark version 4.1.1"),
    ]
    assert caplog.records[1].jvm_logger == "Executor"
    out, err = capfd.readouterr()
    assert "incubator" not in out + err
