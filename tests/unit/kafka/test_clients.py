"""librdkafka's lines as Python log records: quiet for workers, held back when they repeat,
the last error kept as the cause a failure names. No Kafka: the log object is fed directly."""

from __future__ import annotations

import logging

import pytest

from adapter.clock import ManualClock
from adapter.kafka.clients import LOG, LibrdkafkaLog
from adapter.logs import RepeatLimiter

pytestmark = pytest.mark.timeout(30)

REFUSED = "[thrd:127.0.0.1:9/bootstrap]: 127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9 failed: Connection refused (after 0ms in state CONNECT)"  # noqa: E501


def feed(log: LibrdkafkaLog, level: int, text: str, client: str = "rdkafka#producer-1") -> None:
    log.log(level, "%s [%s] %s", "FAIL", client, text)


def shown(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == LOG.name]


def test_an_application_client_shows_a_connection_failure_once_per_window(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOG.name)
    clock = ManualClock()
    log = LibrdkafkaLog(announce=True, limiter=RepeatLimiter(30, clock.monotonic))
    for _ in range(160):  # 40 s of librdkafka's retries, four a second
        feed(log, logging.ERROR, REFUSED)
        clock.advance(250)
    assert [level for level, _ in shown(caplog)] == [logging.ERROR, logging.ERROR]
    assert shown(caplog)[1][1].endswith("(119 more like it in the last 30 s)")


def test_failures_at_other_brokers_or_clients_of_a_process_read_as_one(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOG.name)
    limiter = RepeatLimiter(30)
    producer = LibrdkafkaLog(announce=True, limiter=limiter)
    consumer = LibrdkafkaLog(announce=True, limiter=limiter)
    feed(producer, logging.ERROR, REFUSED)
    feed(consumer, logging.ERROR, REFUSED.replace("/bootstrap", "/1"), "rdkafka#consumer-2")
    assert len(shown(caplog)) == 1


def test_a_worker_client_keeps_librdkafka_quiet_but_remembers_the_cause(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=LOG.name)
    log = LibrdkafkaLog(limiter=RepeatLimiter(30))
    feed(log, logging.ERROR, REFUSED)
    assert shown(caplog) == [], "the worker reports the failure itself"
    assert log.last_error is not None
    assert "Connection refused" in log.last_error


def test_librdkafka_chatter_about_connections_is_debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOG.name)
    log = LibrdkafkaLog(announce=True, limiter=RepeatLimiter(30))
    feed(log, logging.INFO, "[thrd:main]: Disconnected (after 6815ms in state UP)")
    assert shown(caplog) == [(logging.DEBUG, "Disconnected (after 6815ms in state UP)")]


def test_a_line_reads_without_librdkafkas_thread_which_is_kept_apart(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=LOG.name)
    feed(LibrdkafkaLog(announce=True, limiter=RepeatLimiter(30)), logging.ERROR, REFUSED)
    [record] = [r for r in caplog.records if r.name == LOG.name]
    assert record.getMessage().startswith("127.0.0.1:9/bootstrap: Connect to ipv4#127.0.0.1:9")
    assert record.thread_name == "127.0.0.1:9/bootstrap"  # type: ignore[attr-defined]


def test_the_share_consumers_preview_warning_is_information(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # librdkafka 2.16 warns once per share consumer; docs/v5.md says what it means.
    caplog.set_level(logging.DEBUG, logger=LOG.name)
    preview = (
        '[thrd:app]: The share consumer is in "Preview" and is not recommended for production use'
    )
    feed(LibrdkafkaLog(announce=True, limiter=RepeatLimiter(30)), logging.WARNING, preview)
    assert shown(caplog) == [(logging.INFO, preview.removeprefix("[thrd:app]: "))]


def test_an_application_that_set_up_no_logging_is_not_shown_librdkafkas_lines() -> None:
    # Python prints records nobody handles on standard error (logging.lastResort); a library
    # leaves that choice to the application.
    assert any(isinstance(h, logging.NullHandler) for h in LOG.handlers)
