"""What `status` prints: each level's backlog and oldest due time, and groups' retries."""

from __future__ import annotations

import pytest

from adapter.ops.status import GroupRow, LevelRow, render

pytestmark = pytest.mark.timeout(30)

NOW = 10_000_000


def test_a_level_with_a_backlog_says_when_its_oldest_record_falls_due() -> None:
    text = render(
        [LevelRow(1, 1000, 0, None), LevelRow(18, 7_200_000, 3, NOW + 119 * 60_000)], [], NOW
    )
    lines = text.splitlines()
    assert lines[1].split() == ["1", "1s", "0", "-"]
    assert lines[2].split() == ["18", "2h", "3", "in", "119m"]


def test_a_timer_s_fine_hop_shows_as_such_with_its_delay_in_milliseconds() -> None:
    text = render([LevelRow("fine-50ms", 50, 2, None)], [], NOW)
    assert text.splitlines()[1].split() == ["fine-50ms", "50ms", "2", "-"]


def test_an_overdue_level_says_by_how_much() -> None:
    text = render([LevelRow(2, 5000, 7, NOW - 45_000)], [], NOW)
    assert "overdue by 45s" in text


def test_groups_show_their_retry_backlog_and_dead_letters() -> None:
    text = render([], [GroupRow("GID_billing", 4, 2)], NOW)
    assert "does not exist: run `rmq-adapter topics init`" in text
    assert text.splitlines()[-1].split() == ["GID_billing", "4", "2"]
