"""What `transactions list` prints: a table a person reads, from rows and the time alone."""

from __future__ import annotations

import pytest

from adapter.transaction.admin import Row, render

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


def test_a_discarded_row_shows_its_reason_and_when_it_was_resumed() -> None:
    parked = row(reason="checked 15 times", check_times=15)
    resumed = row(reason="checked 15 times", resumed_at_ms=NOW - 30_000, resumed_as="1@7")
    lines = render([parked, resumed], discarded=True, now_ms=NOW).splitlines()
    assert "resumed" in lines[0]
    assert "reason" in lines[0]
    assert lines[1].endswith("-                   checked 15 times")
    assert "30s ago" in lines[2]


def test_an_empty_list_says_so() -> None:
    assert render([], now_ms=NOW).splitlines()[-1] == "  (none)"
