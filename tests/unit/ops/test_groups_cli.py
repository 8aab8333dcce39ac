"""How ``rmq-adapter groups`` reads an operator's times and prints groups, lag and plans."""

from __future__ import annotations

import datetime as dt

import click
import pytest

from adapter.ops.groups import GroupLag, GroupRow, Lag, Member, dead_letter_topic
from adapter.ops.groups_cli import render_lag, render_list, render_plan
from adapter.ops.offset_reset import Move, Target, TargetKind
from adapter.ops.options import parse_time

pytestmark = pytest.mark.timeout(10)


def rows_of(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()]


def test_a_time_is_read_as_epoch_ms_iso_8601_or_mqadmin_s_format() -> None:
    assert parse_time("1795646610349") == 1795646610349
    assert parse_time("2026-11-25T10:00:00+00:00") == 1795600800000
    assert parse_time("2026-11-25T10:00:00Z") == 1795600800000
    local = dt.datetime(2026, 11, 25, 10, 0, 0, 123000).astimezone()
    assert parse_time("2026-11-25#10:00:00:123") == int(local.timestamp() * 1000)


def test_a_time_that_is_none_of_those_is_a_clear_error() -> None:
    with pytest.raises(click.BadParameter, match="'yesterday' is not a time"):
        parse_time("yesterday")


def test_the_list_hides_the_adapter_s_groups_and_names_broadcasting_instances() -> None:
    rows = [
        GroupRow("GID_orders", None, "stable", 2, system=False),
        GroupRow("GID_cache", "host-a", "empty", 0, system=False),
        GroupRow("CID_RMQ_SYS_TRANS", None, "stable", 1, system=True),
    ]
    shown = render_list(rows, system=False)
    assert "CID_RMQ_SYS_TRANS" not in shown
    assert ["GID_cache", "host-a", "broadcasting", "empty", "0"] in rows_of(shown)
    assert "CID_RMQ_SYS_TRANS" in render_list(rows, system=True)


def test_lag_is_shown_per_queue_with_the_retry_topic_and_the_dead_letters() -> None:
    lag = GroupLag(
        "GID_orders",
        "stable",
        [Member("rmq-1", "127.0.0.1", ("Orders[0]",))],
        [Lag("Orders", 0, 0, 10, 7), Lag("%RETRY%GID_orders", 0, 2, 4, None)],
        dead_letters=1,
    )
    text = render_lag(lag)
    assert "rmq-1 at 127.0.0.1: Orders[0]" in text
    assert ["Orders[0]", "10", "7", "3"] in rows_of(text)
    assert ["%RETRY%GID_orders[0]", "4", "-", "2"] in rows_of(text), "no commit: from earliest"
    assert "total lag 5" in text
    assert "dead letters in %DLQ%GID_orders: 1" in text


def test_a_plan_says_it_changed_nothing_until_it_is_executed() -> None:
    moves = [Move("Orders", 0, 7, 10)]
    plan_only = render_plan("G", Target(TargetKind.LATEST), moves, executed=False)
    assert "3 messages skipped, 0 replayed" in plan_only
    assert "nothing changed; run again with --execute" in plan_only
    assert "done" in render_plan("G", Target(TargetKind.LATEST), moves, executed=True)
    timed = render_plan("G", Target(TargetKind.TIME, 1795600800000), moves, executed=False)
    assert "reset of group G to 2026-11-25T10:00:00.000+00:00" in timed


def test_a_kafka_group_that_is_not_a_rocketmq_group_has_no_dead_letter_topic() -> None:
    assert dead_letter_topic("GID_orders") == ".25DLQ.25GID_orders"
    assert dead_letter_topic("orders.v2") is None, "a foreign consumer's group: no DLQ, no error"
    assert dead_letter_topic(".25CHECK.25PG") is None
