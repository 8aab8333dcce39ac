"""How a share group's progress reads in ``groups lag`` and a reset's plan."""

from __future__ import annotations

import pytest

from adapter.ops.groups import GroupLag, GroupRow, Lag, Member
from adapter.ops.groups_cli import render_lag, render_list
from adapter.ops.share_groups import ShareGroupsUnavailable, position, require_plaintext
from adapter.ops.share_protocol import StartOffset

pytestmark = pytest.mark.timeout(10)


def rows_of(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


def start(spso: int, lag: int) -> StartOffset:
    return StartOffset("Orders", 0, spso, lag, 0, None)


def test_a_reset_moves_from_the_end_less_kafka_s_lag_which_counts_acks_past_the_spso() -> None:
    assert position(start(0, 0), end=5) == 5, "all acknowledged, SPSO persisted late"
    assert position(start(2, 1), end=5) == 4
    assert position(start(2, -1), end=5) == 2, "no lag reported: the SPSO"
    assert position(start(-1, -1), end=5) is None, "not fetched: from the earliest"
    assert position(None, end=5) is None


def test_a_share_group_is_listed_as_a_simple_consumer_s() -> None:
    rows = [GroupRow("GID_simple", None, "stable", 2, system=False, share=True)]
    shown = render_list(rows, system=False, note="(a note)")
    assert ["GID_simple", "-", "simple", "(share", "group)", "stable", "2"] in rows_of(shown)
    assert shown.endswith("(a note)")


def test_a_share_group_s_lag_shows_its_start_offsets_and_kafka_s_lag() -> None:
    lag = GroupLag(
        "GID_simple",
        "stable",
        [Member("rmq-1#0", "127.0.0.1", ("Orders[0]",))],
        [Lag("Orders", 0, 0, 10, 4, reported=3), Lag("Orders", 1, 2, 6, None)],
        dead_letters=None,
        share=True,
    )
    text = render_lag(lag)
    assert text.startswith("group GID_simple: stable, 1 member, simple (share group)")
    assert ["queue", "end", "offset", "start", "offset", "lag"] in rows_of(text)
    assert ["Orders[0]", "10", "4", "3"] in rows_of(text), "Kafka's lag, not 10 - 4"
    assert ["Orders[1]", "6", "-", "4"] in rows_of(text), "not fetched: from the earliest"
    assert "total lag 7" in text


def test_share_groups_are_read_over_plaintext_listeners_only_and_say_so_elsewhere() -> None:
    require_plaintext({"bootstrap.servers": "b:9092"})
    require_plaintext({"security.protocol": "PLAINTEXT"})
    with pytest.raises(ShareGroupsUnavailable, match="plaintext listeners only, not SASL_SSL"):
        require_plaintext({"security.protocol": "sasl_ssl"})
