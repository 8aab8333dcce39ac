"""A real topic refusing deliveries: the back-off, and the grace of a missing topic."""

from __future__ import annotations

import pytest

from adapter.schedule.refusals import MissingTopics, backoff_s

pytestmark = pytest.mark.timeout(30)


def test_refused_deliveries_back_off_exponentially_up_to_thirty_seconds() -> None:
    waits = [backoff_s(n) for n in (1, 2, 3, 4, 20)]
    assert waits[0] < waits[1] < waits[2] < waits[3]
    assert 30 <= waits[4] <= 30.1


def test_a_missing_topic_is_waited_for_through_the_grace_then_its_record_is_parked() -> None:
    missing = MissingTopics(grace_ms=60_000)
    assert missing.park_reason(3, 7, "Gone", now_ms=1_000) is None
    assert missing.park_reason(3, 7, "Gone", now_ms=60_999) is None, "still within the grace"
    why = missing.park_reason(3, 7, "Gone", now_ms=61_000)
    assert why == "missing topic: 'Gone' did not exist for 60.0 s"


def test_the_grace_starts_again_for_the_next_record_once_the_level_moved_on() -> None:
    missing = MissingTopics(grace_ms=1_000)
    assert missing.park_reason(0, 1, "Gone", now_ms=0) is None
    missing.moved_on(0)
    assert missing.park_reason(0, 1, "Gone", now_ms=5_000) is None, "counted again from now"
    assert missing.park_reason(1, 1, "Gone", now_ms=5_500) is None, "each level its own wait"
    assert missing.park_reason(0, 1, "Gone", now_ms=6_000) is not None


def test_records_committed_before_the_waiting_head_do_not_restart_its_grace() -> None:
    missing = MissingTopics(grace_ms=1_000)
    assert missing.park_reason(0, 3, "Gone", now_ms=0) is None
    missing.moved_on(0, 3)  # the level's records before the head were forwarded
    assert missing.park_reason(0, 3, "Gone", now_ms=1_000) is not None, "counted from t=0"


def test_a_grace_of_zero_parks_at_the_first_refusal() -> None:
    assert MissingTopics(grace_ms=0).park_reason(0, 0, "Gone", now_ms=5) is not None
