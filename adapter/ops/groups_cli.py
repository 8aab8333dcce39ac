"""``rmq-adapter groups list|lag|reset``: consumer groups, their progress, and offset resets.

Plays the part of ``mqadmin consumerProgress`` and ``resetOffsetByTime`` and of the dashboard's
consumer page (:mod:`adapter.ops.groups` says how RocketMQ's groups map onto Kafka's). A reset
prints its plan (per queue: from, to, messages skipped or replayed) and changes nothing unless
``--execute`` is given, so the same command line is first read, then run. The 5.x
``SimpleConsumer``'s groups, Kafka share groups, are listed, shown and reset beside the consumer
groups (:mod:`adapter.ops.share_groups`): a name that is no consumer group's is looked up as a
share group's (:mod:`adapter.ops.all_groups`).

Known gaps: those of :mod:`adapter.ops.all_groups`.
"""

from __future__ import annotations

import datetime as dt

import click

from adapter.config import KafkaSettings
from adapter.ops.all_groups import AllGroups
from adapter.ops.groups import GroupLag, GroupRow
from adapter.ops.offset_reset import Move, Target, TargetKind, totals
from adapter.ops.options import bootstrap, clear_errors, option, parse_time, plural, timeout
from adapter.ops.share_groups import KIND
from adapter.text_table import table


def _utc(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds")


def model_of(row: GroupRow) -> str:
    """RocketMQ's message model of a group, or the share group of a 5.x SimpleConsumer."""
    if row.share:
        return KIND
    return "broadcasting" if row.instance else "clustering"


def render_list(rows: list[GroupRow], *, system: bool, note: str | None = None) -> str:
    shown = [r for r in rows if system or not r.system]
    lines = ["(no consumer groups)"] if not shown else []
    body = [(r.group, r.instance or "-", model_of(r), r.state, r.members) for r in shown]
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
    rows, note = _all(bootstrap, timeout).rows()
    click.echo(render_list(rows, system=system, note=note and f"({note})"))


@groups_group.command("lag")
@click.argument("group")
@bootstrap
@timeout
@clear_errors
def groups_lag(group: str, bootstrap: str, timeout: float) -> None:
    """GROUP's members, and per queue its end and committed offsets and the lag between."""
    click.echo(render_lag(_all(bootstrap, timeout).lag(group)))


def _all(bootstrap: str, timeout: float) -> AllGroups:
    return AllGroups(KafkaSettings.from_env(bootstrap).librdkafka({}), timeout)


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
    moves = _all(bootstrap, timeout).reset(group, topic, target, execute=execute)
    click.echo(render_plan(group, target, moves, executed=execute))
