"""The Spark jobs' results as Python data, and as a person reads them: tables, rounded numbers.

Not a RocketMQ behaviour: the view an operator gets of ``rmq-adapter spark telemetry`` (delay
lateness per level and per timer band, transaction outcomes and checks per producer group) and
of ``rmq-adapter spark points``. The command prints these tables on standard output, apart from
the logs (standard error); ``--json FILE`` writes the same result as JSON, milliseconds rounded
to a tenth. Pure: data in, text out; no Spark here.

Known gaps: none.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from adapter.text_table import table


@dataclass(frozen=True, slots=True)
class LevelLateness:
    """Delivered minus due, in ms, of the deliveries of one delay level."""

    level: int
    deliveries: int
    p50_ms: float
    p99_ms: float
    max_ms: float


@dataclass(frozen=True, slots=True)
class BandLateness:
    """Delivered minus due, in ms, of the timer messages of one band (how far ahead they were
    set: ``label``, e.g. ``1-10s``)."""

    band: int
    label: str
    deliveries: int
    p50_ms: float
    p99_ms: float
    max_ms: float


@dataclass(frozen=True, slots=True)
class GroupOutcomes:
    producer_group: str
    transactions: int
    commits: int
    rollbacks: int
    discards: int
    pending: int
    checks: int
    checked_transactions: int
    max_checks_per_transaction: int
    mean_checks_per_transaction: float
    commit_p50_ms: float | None
    commit_p99_ms: float | None


@dataclass(frozen=True, slots=True)
class TelemetryResult:
    input_rows: int
    batches: int
    lateness: list[LevelLateness]
    transactions: list[GroupOutcomes]
    undecodable: int
    timers: list[BandLateness] = field(default_factory=list)

    def group(self, producer_group: str) -> GroupOutcomes | None:
        return next((g for g in self.transactions if g.producer_group == producer_group), None)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _lateness_table(
    title: str, key: str, rows: Sequence[tuple[object, int, float, float, float]], none: str
) -> list[str]:
    if not rows:
        return [title, f"  ({none})"]
    shown = [(k, n, _ms(p50), _ms(p99), _ms(top)) for k, n, p50, p99, top in rows]
    return [title, *table((key, "deliveries", "p50", "p99", "max"), shown)]


def format_lateness(result: TelemetryResult) -> list[str]:
    levels = [(r.level, r.deliveries, r.p50_ms, r.p99_ms, r.max_ms) for r in result.lateness]
    timers = [(r.label, r.deliveries, r.p50_ms, r.p99_ms, r.max_ms) for r in result.timers]
    return [
        *_lateness_table(
            "delay lateness (delivered - due), ms", "level", levels, "no delayed message delivered"
        ),
        "",
        *_lateness_table(
            "timer lateness (delivered - deliver time), ms, by how far ahead it was set",
            "set ahead",
            timers,
            "no timer message delivered",
        ),
    ]


def format_transactions(result: TelemetryResult) -> list[str]:
    lines = ["transactions per producer group"]
    if not result.transactions:
        return [*lines, "  (no transactional message)"]
    lines += table(
        ("group", "txns", "commit", "rollbk", "discard", "pending", "checks", "checked",
         "max chk", "commit p50 ms", "p99 ms"),
        [
            (g.producer_group, g.transactions, g.commits, g.rollbacks, g.discards, g.pending,
             g.checks, g.checked_transactions, g.max_checks_per_transaction,
             _ms(g.commit_p50_ms), _ms(g.commit_p99_ms))
            for g in result.transactions
        ],
    )  # fmt: skip
    return lines


def format_telemetry(result: TelemetryResult) -> str:
    """Lateness per level and per timer band, and transaction outcomes and checks per group."""
    lines = [*format_lateness(result), "", *format_transactions(result)]
    if result.undecodable:
        lines.append(
            f"  {result.undecodable} system records did not decode (kept in the facts table)"
        )
    lines.append("")
    batches = f"{result.batches} batch{'' if result.batches == 1 else 'es'}"
    lines.append(f"this run read {result.input_rows:,} records in {batches}")
    return "\n".join(lines)


def format_points(result: Any, *, top: int = 10) -> str:
    """A points run (:class:`~adapter.spark.points.PointsResult`): credits and balances."""
    lines = [
        "points ledger (Delta, MERGE on msg_id)",
        f"  {result.credited:,} payments credited, {result.rejected:,} rejected; this run read "
        f"{result.input_rows:,} messages in {result.batches} batch"
        f"{'' if result.batches == 1 else 'es'}",
    ]
    ranked = sorted(result.balances.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    lines += table(("member", "points"), [(user, f"{points:,}") for user, points in ranked])
    return "\n".join(lines)


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 1)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def as_json(job: str, result: Any) -> str:
    """A job's result as JSON: every field, milliseconds rounded to a tenth."""
    return json.dumps({"job": job, **_rounded(dataclasses.asdict(result))}, indent=2, default=str)
