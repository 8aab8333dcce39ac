"""``rmq-adapter dlq list|show|resend|export GROUP``: a consumer group's dead letters.

Plays the part of rocketmq-dashboard's DLQ page on ``%DLQ%<group>``: browse (``list``), one
message's headers and body (``show``), resend to the group (``resend``: exactly once, see
:mod:`adapter.ops.dead_letters`) and ``export`` as JSON lines with base64 bodies. Windows are
``--begin``/``--end`` times (epoch ms, ISO 8601, or ``yyyy-MM-dd#HH:mm:ss:SSS``).

Known gaps: none.
"""

from __future__ import annotations

import datetime as dt
from typing import TextIO

import click

from adapter.config import KafkaSettings
from adapter.ops.dead_letter_records import DeadLetter, export_line, preview, selected
from adapter.ops.dead_letters import DeadLetters, Outcome
from adapter.ops.options import bootstrap, clear_errors, parse_time, plural, timeout
from adapter.text_table import table

_begin = click.option("--begin", default=None, help="Only dead letters stored at or after this.")
_end = click.option("--end", default=None, help="Only dead letters stored before this.")


def _utc(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _letters(
    group: str, bootstrap: str, timeout: float, begin: str | None, end: str | None
) -> tuple[DeadLetters, list[DeadLetter]]:
    begin_ms = None if begin is None else parse_time(begin)
    end_ms = None if end is None else parse_time(end)
    dead = DeadLetters(KafkaSettings.from_env(bootstrap).librdkafka({}), group, timeout)
    return dead, selected(list(dead.read(begin_ms)), [], begin_ms, end_ms)


def render_list(topic: str, letters: list[DeadLetter]) -> str:
    if not letters:
        return f"no dead letters in {topic} in that window"
    rows = [
        (d.place, _utc(d.timestamp_ms), d.msg_id, d.topic, d.reconsume_times, d.reason[:60])
        for d in letters
    ]
    header = ("place", "stored (UTC)", "msg id", "topic", "reconsumed", "reason")
    return "\n".join([*table(header, rows, indent=""), f"{plural(len(letters), 'dead letter')}"])


def render_letter(letter: DeadLetter) -> str:
    lines = [
        f"msg id      {letter.msg_id}",
        f"place       {letter.place}, stored {_utc(letter.timestamp_ms)} UTC",
        f"topic       {letter.topic}",
        f"reason      {letter.reason}",
        "headers",
    ]
    for name, value in letter.headers:
        shown = "(null)" if value is None else preview(value, 80)
        lines.append(f"  {name} = {shown}")
    lines.append(f"body        {preview(letter.body)}")
    return "\n".join(lines)


def render_outcome(outcome: Outcome) -> str:
    letter = outcome.letter
    if outcome.resent:
        return f"resent            {letter.msg_id} ({letter.place})"
    return f"resent before     {letter.msg_id} ({letter.place}): skipped"


@click.group("dlq")
def dlq_group() -> None:
    """A consumer group's dead letters: list, show, resend, export."""


@dlq_group.command("list")
@click.argument("group")
@bootstrap
@_begin
@_end
@timeout
@clear_errors
def dlq_list(
    group: str, bootstrap: str, begin: str | None, end: str | None, timeout: float
) -> None:
    """GROUP's dead letters: place, time, id, original topic, reconsume times, reason."""
    dead, letters = _letters(group, bootstrap, timeout, begin, end)
    click.echo(render_list(dead.dlq_topic, letters))


@dlq_group.command("show")
@click.argument("group")
@click.argument("msg_id")
@bootstrap
@timeout
@clear_errors
def dlq_show(group: str, msg_id: str, bootstrap: str, timeout: float) -> None:
    """The dead letters of GROUP with MSG_ID: headers and body."""
    dead, letters = _letters(group, bootstrap, timeout, None, None)
    found = selected(letters, [msg_id], None, None)
    if not found:
        raise click.ClickException(f"no dead letter with id {msg_id} in {dead.dlq_topic}")
    click.echo("\n\n".join(render_letter(letter) for letter in found))


@dlq_group.command("resend")
@click.argument("group")
@bootstrap
@click.option("--msg-id", "msg_ids", multiple=True, help="Resend this message (repeatable).")
@_begin
@_end
@click.option(
    "--rate", type=click.FloatRange(min=0.1), default=None, help="At most this many per second."
)
@timeout
@clear_errors
def dlq_resend(
    group: str,
    bootstrap: str,
    msg_ids: tuple[str, ...],
    begin: str | None,
    end: str | None,
    rate: float | None,
    timeout: float,
) -> None:
    """Send GROUP's dead letters back to the group (its retry topic), each exactly once."""
    if not msg_ids and begin is None and end is None:
        raise click.UsageError("say which: --msg-id (repeatable), or a --begin/--end window")
    dead, letters = _letters(group, bootstrap, timeout, begin, end)
    chosen = selected(letters, list(msg_ids), None, None)
    missing = sorted(set(msg_ids) - {letter.msg_id for letter in chosen})
    outcomes = dead.resend(
        chosen, rate_per_s=rate, on_outcome=lambda o: click.echo(render_outcome(o))
    )
    resent = sum(o.resent for o in outcomes)
    click.echo(
        f"{plural(resent, 'message')} resent to %RETRY%{group}, "
        f"{len(outcomes) - resent} resent before"
    )
    if missing:
        raise click.ClickException(f"no dead letter with id {', '.join(missing)}")


@dlq_group.command("export")
@click.argument("group")
@bootstrap
@_begin
@_end
@click.option(
    "--output",
    type=click.File("w"),
    default="-",
    help="Write the JSON lines here (default: standard output).",
)
@timeout
@clear_errors
def dlq_export(
    group: str,
    bootstrap: str,
    begin: str | None,
    end: str | None,
    output: TextIO,
    timeout: float,
) -> None:
    """GROUP's dead letters as JSON lines, bodies in base64."""
    _, letters = _letters(group, bootstrap, timeout, begin, end)
    for letter in letters:
        output.write(export_line(group, letter) + "\n")
    click.echo(f"{plural(len(letters), 'dead letter')} exported", err=True)
