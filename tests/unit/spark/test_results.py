"""What `rmq-adapter spark telemetry|points` prints: tables with rounded numbers, and JSON
whose milliseconds are rounded, from results alone (no Spark)."""

from __future__ import annotations

import json

import pytest

from adapter.spark.points import PointsResult
from adapter.spark.results import (
    BandLateness,
    GroupOutcomes,
    LevelLateness,
    TelemetryResult,
    as_json,
    format_points,
    format_telemetry,
)

pytestmark = pytest.mark.timeout(30)

RESULT = TelemetryResult(
    input_rows=2013,
    batches=1,
    lateness=[LevelLateness(1, 200, 42.5, 142.03999999999996, 146.0)],
    transactions=[
        GroupOutcomes("PID_payments", 10, 8, 2, 0, 0, 2, 2, 1, 0.2, 165886.39999999877, 9.0)
    ],
    undecodable=0,
    timers=[BandLateness(1, "1-10s", 59, 11.0, 73.4, 0.0)],
)


def test_telemetry_reads_as_tables_of_whole_milliseconds() -> None:
    text = format_telemetry(RESULT)
    lines = text.splitlines()
    assert lines[0] == "delay lateness (delivered - due), ms"
    assert lines[1].split() == ["level", "deliveries", "p50", "p99", "max"]
    assert lines[2].split() == ["1", "200", "42", "142", "146"]
    assert "1-10s" in text
    [timer] = [line for line in lines if line.strip().startswith("1-10s")]
    assert timer.split() == ["1-10s", "59", "11", "73", "0"]
    [group] = [line for line in lines if line.strip().startswith("PID_payments")]
    assert group.split()[-2:] == ["165,886", "9"]
    assert "165886.39" not in text
    assert lines[-1] == "this run read 2,013 records in 1 batch"


def test_telemetry_says_when_nothing_was_delivered() -> None:
    empty = TelemetryResult(0, 0, [], [], 0)
    text = format_telemetry(empty)
    assert "(no delayed message delivered)" in text
    assert "(no timer message delivered)" in text
    assert "(no transactional message)" in text
    assert text.endswith("in 0 batches")


def test_json_keeps_every_field_with_milliseconds_rounded_to_a_tenth() -> None:
    shown = json.loads(as_json("telemetry", RESULT))
    assert shown["job"] == "telemetry"
    assert shown["lateness"][0]["p99_ms"] == 142.0
    assert shown["transactions"][0]["commit_p50_ms"] == 165886.4
    assert shown["timers"][0]["label"] == "1-10s"


def test_points_show_credits_and_the_members_with_most_points() -> None:
    result = PointsResult(26, 2, 25, 1, {"bob": 130, "alice": 210, "carol": 1800})
    lines = format_points(result, top=2).splitlines()
    assert "25 payments credited, 1 rejected; this run read 26 messages in 2 batches" in lines[1]
    assert [line.split() for line in lines[2:]] == [
        ["member", "points"],
        ["carol", "1,800"],
        ["alice", "210"],
    ]
