"""``rmq-adapter groups list|lag|reset``: consumer groups, their progress, and offset resets.

Plays the part of ``mqadmin consumerProgress`` and ``resetOffsetByTime`` and of the dashboard's
consumer page (:mod:`adapter.ops.groups` says how RocketMQ's groups map onto Kafka's). A reset
prints its plan (per queue: from, to, messages skipped or replayed) and changes nothing unless
``--execute`` is given, so the same command line is first read, then run. The 5.x
``SimpleConsumer``'s groups, Kafka share groups, are listed, shown and reset beside the consumer
groups (:mod:`adapter.ops.share_groups`): a name that is no consumer group's is looked up as a
share group's.

Known gaps: share groups are read over plaintext listeners only; elsewhere ``list`` says they
are left out, and ``lag``/``reset`` of a name that is no consumer group say why no share group
was looked up.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TypeVar

import click

from adapter.config import KafkaSettings
from adapter.ops.groups import GroupLag, GroupRow, Groups, NoGroupError
from adapter.ops.offset_reset import Move, Target, TargetKind, plan, totals
from adapter.ops.options import bootstrap, clear_errors, option, parse_time, plural, timeout
from adapter.ops.share_groups import KIND, ShareGroups, ShareGroupsUnavailable
from adapter.text_table import table

T = TypeVar("T")


def _utc(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds")


def _model(row: GroupRow) -> str:
    if row.share:
        return KIND
    return "broadcasting" if row.instance else "clustering"


def render_list(rows: list[GroupRow], *, system: bool, note: str | None = None) -> str:
    shown = [r for r in rows if system or not r.system]
    lines = ["(no consumer groups)"] if not shown else []
    body = [(r.group, r.instance or "-", _model(r), r.state, r.members) for r in shown]
    if body:
        lines = table(("group", "instance", "model", "state", "members"), body, indent="")
    return "\n".join([*lines, *([note] if note else [])])


def render_lag(lag: GroupLag) -> str:
    kind = f", {KIND}" if lag.share else ""
    lines = [f"group {lag.group}: {lag.state}, {plural(len(lag.members), 'member')}{kind}"]
    for member in lag.members:
        queues = ", ".join(member.queues) or "no queues"
        lines.append(f"  {member.client_id} at {member.host}: {queues}")
    rows = [
        (f"{q.topic}[{q.partition}]", q.end, "-" if q.committed is None else q.committed, q.lag)
        for q in lag.queues
    ]
    lines.append("")
    if rows:
        progress = "start offset" if lag.share else "committed"
        lines += table(("queue", "end offset", progress, "lag"), rows, indent="")
        lines.append(f"total lag {sum(q.lag for q in lag.queues):,}")
    else:
        lines.append("(no queues: the group has no members and no committed offsets)")
    if lag.dead_letters is not None:
        lines.append(f"dead letters in %DLQ%{lag.group.partition('@')[0]}: {lag.dead_letters:,}")
    return "\n".join(lines)


def render_plan(group: str, target: Target, moves: list[Move], *, executed: bool) -> str:
    wanted = _utc(target.value) if target.kind is TargetKind.TIME else target.describe()
    rows = [(f"{m.topic}[{m.partition}]", m.start, m.to, m.skipped, m.replayed) for m in moves]
    counted = totals(moves)
    lines = [
        f"reset of group {group} to {wanted}",
        *table(("queue", "from", "to", "skipped", "replayed"), rows, indent=""),
        f"{counted['skipped']:,} messages skipped, {counted['replayed']:,} replayed, "
        f"{plural(counted['unchanged'], 'queue')} unchanged",
        "done: the group's offsets are reset"
        if executed
        else "a plan only: nothing changed; run again with --execute to reset",
    ]
    return "\n".join(lines)


def target_of(
    to_time: str | None, to_offset: int | None, to_earliest: bool, to_latest: bool
) -> Target:
    """The reset's target from exactly one of the four choices (a usage error otherwise)."""
    chosen = [to_time is not None, to_offset is not None, to_earliest, to_latest]
    if sum(chosen) != 1:
        raise click.UsageError(
            "give exactly one of --to-time, --to-offset, --to-earliest, --to-latest"
        )
    if to_time is not None:
        return Target(TargetKind.TIME, parse_time(to_time))
    if to_offset is not None:
        return Target(TargetKind.OFFSET, to_offset)
    return Target(TargetKind.EARLIEST if to_earliest else TargetKind.LATEST)


@click.group("groups")
def groups_group() -> None:
    """Consumer groups: list them, their lag, and reset their offsets."""


@groups_group.command("list")
@bootstrap
@option("--system", is_flag=True, default=False, help="Show the adapter's own groups too.")
@timeout
@clear_errors
def groups_list(bootstrap: str, system: bool, timeout: float) -> None:
    """The consumer groups, their message model, state and members."""
    conf = KafkaSettings.from_env(bootstrap).librdkafka({})
    groups = Groups(conf, timeout)
    rows, note = groups.rows(), None
    try:
        rows = sorted([*rows, *ShareGroups(groups, conf, timeout).rows()], key=lambda r: r.group)
    except ShareGroupsUnavailable as exc:
        note = f"(share groups not listed: {exc})"
    click.echo(render_list(rows, system=system, note=note))


@groups_group.command("lag")
@click.argument("group")
@bootstrap
@timeout
@clear_errors
def groups_lag(group: str, bootstrap: str, timeout: float) -> None:
    """GROUP's members, and per queue its end and committed offsets and the lag between."""
    conf = KafkaSettings.from_env(bootstrap).librdkafka({})
    groups = Groups(conf, timeout)
    try:
        lag = groups.lag(group)
    except NoGroupError as exc:
        lag = _as_share(exc, lambda: ShareGroups(groups, conf, timeout).lag(group))
    click.echo(render_lag(lag))


def _as_share(missing: NoGroupError, call: Callable[[], T]) -> T:
    """``call`` on share groups, once a name is no consumer group's; if share groups cannot be
    read here, the consumer group's error, saying why no share group was looked for."""
    try:
        return call()
    except ShareGroupsUnavailable as exc:
        raise NoGroupError(f"{missing}; no share group looked up: {exc}") from exc


@groups_group.command("reset")
@click.argument("group")
@bootstrap
@click.option("--topic", default=None, help="Reset this topic only (default: every topic).")
@click.option("--to-time", default=None, help="The first message stored at or after.")
@click.option(
    "--to-offset", "to_offset", type=click.IntRange(min=0), default=None, help="An offset."
)
@click.option("--to-earliest", is_flag=True, default=False, help="The earliest retained message.")
@click.option("--to-latest", is_flag=True, default=False, help="The end: skip everything.")
@click.option("--execute", is_flag=True, default=False, help="Reset; without it, print the plan.")
@timeout
@clear_errors
def groups_reset(
    group: str,
    bootstrap: str,
    topic: str | None,
    to_time: str | None,
    to_offset: int | None,
    to_earliest: bool,
    to_latest: bool,
    execute: bool,
    timeout: float,
) -> None:
    """Move GROUP's committed offsets: print the plan, and with --execute, do it."""
    target = target_of(to_time, to_offset, to_earliest, to_latest)
    conf = KafkaSettings.from_env(bootstrap).librdkafka({})
    groups = Groups(conf, timeout)
    runner: Groups | ShareGroups = groups
    try:
        queues = groups.queues(group, topic, target)
    except NoGroupError as exc:
        runner = ShareGroups(groups, conf, timeout)
        queues = _as_share(exc, lambda: runner.queues(group, topic, target))
    moves = plan(queues, target)
    if execute:
        runner.execute(group, moves)
    click.echo(render_plan(group, target, moves, executed=execute))
