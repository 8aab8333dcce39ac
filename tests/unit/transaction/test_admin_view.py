"""What `transactions list` prints: a table a person reads or JSON, from rows and the time alone."""

from __future__ import annotations

import json

import pytest

from adapter.transaction.admin import Row
from adapter.transaction.admin_view import as_json, render, select

pytestmark = pytest.mark.timeout(30)

NOW = 1_000_000_000


def row(**changes: object) -> Row:
    fields: dict[str, object] = {
        "transaction_id": "7F0000010001AB12CD34000000000001",
        "producer_group": "PID_payments",
        "topic": "Payments",
        "partition": 3,
        "offset": 42,
        "born_ms": NOW - 90_000,
        "check_times": 2,
    }
    fields.update(changes)
    return Row(**fields)  # type: ignore[arg-type]


def test_a_pending_row_shows_its_age_checks_and_half_message() -> None:
    lines = render([row()], now_ms=NOW).splitlines()
    assert lines[0].split() == ["transaction", "id", "group", "topic", "age", "checks", "half"]
    assert lines[1].split() == [
        "7F0000010001AB12CD34000000000001",
        "PID_payments",
        "Payments",
        "90s",
        "2",
        "3@42",
    ]


def test_ages_read_in_minutes_and_hours_once_they_grow() -> None:
    text = render([row(born_ms=NOW - 600_000), row(born_ms=NOW - 3 * 3600_000)], now_ms=NOW)
    assert " 10m " in text
    assert " 3h " in text


def test_a_discarded_row_shows_its_reason_when_it_was_resumed_and_what_became_of_it() -> None:
    parked = row(reason="checked 15 times", check_times=15)
    resumed = row(
        reason="checked 15 times",
        resumed_at_ms=NOW - 30_000,
        resumed_as="1@7",
        outcome="committed",
    )
    lines = render([parked, resumed], discarded=True, now_ms=NOW).splitlines()
    assert lines[0].split()[-4:] == ["resumed", "since", "then", "reason"]
    assert lines[1].split()[-5:] == ["-", "-", "checked", "15", "times"]
    assert lines[2].split()[-6:] == ["30s", "ago", "committed", "checked", "15", "times"]


def test_rows_are_filtered_by_group_and_topic() -> None:
    rows = [row(), row(producer_group="PID_other"), row(topic="Refunds")]
    assert select(rows, group="PID_payments") == [rows[0], rows[2]]
    assert select(rows, topic="Refunds") == [rows[2]]
    assert select(rows, group="PID_payments", topic="Payments") == [rows[0]]
    assert select(rows) == rows


def test_json_has_every_field_of_a_row_its_age_and_the_skipped_records() -> None:
    shown = json.loads(as_json([row()], now_ms=NOW, skipped=["skipped offset 3: forged"]))
    [listed] = shown["transactions"]
    assert listed["transaction_id"] == "7F0000010001AB12CD34000000000001"
    assert listed["age_ms"] == 90_000
    assert listed["outcome"] is None
    assert shown["skipped"] == ["skipped offset 3: forged"]


def test_an_empty_list_says_so() -> None:
    assert render([], now_ms=NOW).splitlines()[-1] == "  (none)"
