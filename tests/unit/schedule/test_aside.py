"""A due record whose real topic is missing: set aside on a hop that doubles its wait, carrying
since when it waits, and parked once it has waited the grace."""

from __future__ import annotations

import pytest

from adapter import properties as prop
from adapter.delay import DelayLevels
from adapter.hops import HopTable
from adapter.schedule import timer
from adapter.schedule.aside import SCHEDULE, SINCE_HEADER, set_aside
from adapter.schedule.head_of_line import Entry
from adapter.schedule.held import Parked
from adapter.schedule.plan import POISON

pytestmark = pytest.mark.timeout(30)

HOPS = HopTable.of(DelayLevels.parse())
NOW = 1_700_000_000_000
GRACE = 60_000


def held(since: int | None = None, deliver_ms: int | None = None) -> Entry[Parked]:
    return Entry(17, 4, NOW, Parked(b"v", "ID" if deliver_ms else None, deliver_ms, since))


def aside(entry: Entry[Parked], now_ms: int = NOW):  # type: ignore[no-untyped-def]
    return set_aside(entry, "Gone", "ID", now_ms=now_ms, grace_ms=GRACE, hops=HOPS)


def test_the_first_refusal_sets_the_record_aside_on_the_shortest_hops_with_the_time() -> None:
    send = aside(held())
    assert (send.kind, send.topic, send.partition) == ("aside", SCHEDULE, HOPS.partition_for(100))
    headers = dict(send.headers)
    assert headers[SINCE_HEADER] == str(NOW).encode()
    assert headers[timer.HOP_DUE_HEADER] == str(NOW + 100).encode()
    assert headers[prop.UNIQ_KEY] == b"ID"
    assert timer.DELIVER_HEADER not in headers, "a level's record stays one"
    assert send.value == b"v"


def test_the_wait_doubles_up_to_thirty_seconds_on_the_longest_hop_that_fits() -> None:
    waits = []
    for waited in (100, 1_600, 12_000, 50_000):
        send = aside(held(since=NOW - waited))
        assert send.partition is not None
        waits.append(HOPS.delay_ms(send.partition))
    assert waits == [100, 1_000, 10_000, 30_000]


def test_a_record_that_waited_the_grace_is_parked_with_how_long() -> None:
    send = aside(held(since=NOW - GRACE))
    assert (send.kind, send.topic) == ("park", POISON)
    assert send.reason == "missing topic: 'Gone' did not exist for 60.0 s"
    assert dict(send.headers)["source.offset"] == b"4"


def test_a_timer_set_aside_stays_a_timer_with_its_deliver_time() -> None:
    send = aside(held(deliver_ms=NOW - 5))
    assert dict(send.headers)[timer.DELIVER_HEADER] == str(NOW - 5).encode()
