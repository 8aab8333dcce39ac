"""Structured logs: JSON lines, and repeated lines held back then summed up."""

from __future__ import annotations

import json
import logging

import pytest

from adapter.clock import ManualClock
from adapter.logs import JsonFormatter, RepeatLimiter, shape

pytestmark = pytest.mark.timeout(30)


def test_a_log_record_is_one_json_object_with_its_extra_fields() -> None:
    record = logging.makeLogRecord(
        {"name": "adapter.x", "levelname": "ERROR", "msg": "cannot %s", "args": ("reach",)}
    )
    record.client = "rdkafka#producer-1"
    line = json.loads(JsonFormatter().format(record))
    assert line["msg"] == "cannot reach"
    assert line["level"] == "ERROR"
    assert line["logger"] == "adapter.x"
    assert line["client"] == "rdkafka#producer-1"


def test_lines_that_differ_only_in_numbers_have_one_shape() -> None:
    a = "Connect to ipv4#127.0.0.1:1 failed (after 0ms in state CONNECT)"
    b = "Connect to ipv4#127.0.0.1:1 failed (after 12ms in state CONNECT)"
    assert shape(a) == shape(b)
    assert shape(a) != shape("Disconnected (after 0ms in state UP)")


def test_a_repeated_line_passes_once_then_once_a_window_with_the_count_held_back() -> None:
    clock = ManualClock()
    limiter = RepeatLimiter(window_s=30, monotonic=clock.monotonic)
    assert limiter.admit("fail") == 0
    held = [limiter.admit("fail") for _ in range(99)]
    assert held == [None] * 99
    clock.advance(30_000)
    assert limiter.admit("fail") == 99, "the next line says how many were held back"
    assert limiter.admit("other") == 0, "another kind of line is not held back"


def test_forty_seconds_of_a_line_every_quarter_second_costs_two_lines() -> None:
    clock = ManualClock()
    limiter = RepeatLimiter(window_s=30, monotonic=clock.monotonic)
    shown = 0
    for _ in range(160):
        shown += limiter.admit("FAIL") is not None
        clock.advance(250)
    assert shown == 2
