"""Both jobs run once (``availableNow``) with their results as Python data, a text report and
a PNG chart, for the demo.

Reproduces nothing of RocketMQ: it is the view a person gets of the two jobs. The points job
credits what was committed; the telemetry job measures the adapter; :func:`run_report` runs
both on one session and adds the commit-to-ledger time of each credited payment (credited_at,
when its batch was merged, minus committed_at, when its commit reached the topic).
:func:`format_report` prints the tables; :func:`draw_chart` draws lateness per delay level and
commit-to-ledger time with matplotlib (a pinned dependency of the ``spark`` extra).

Known gaps: ``credited_at`` is taken when the batch's MERGE starts, so commit-to-ledger here is
short of the time until the rows are readable by the MERGE's own duration; ``bench/spark.py``
measures the full time from the producer's commit to the MERGE's return.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from adapter.spark import ledger
from adapter.spark.config import SparkJobConfig
from adapter.spark.points import PointsResult, run_points
from adapter.spark.session import build_session
from adapter.spark.telemetry import TelemetryResult, run_telemetry


@dataclass(frozen=True, slots=True)
class SparkReport:
    points: PointsResult
    telemetry: TelemetryResult
    commit_to_ledger_ms: list[float]
    """One value per credited ledger row, in commit order."""

    def commit_to_ledger_percentile(self, q: float) -> float | None:
        return _percentile(self.commit_to_ledger_ms, q)


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def commit_to_ledger_ms(spark: SparkSession, table: Path) -> list[float]:
    """credited_at - committed_at of each credited row, in ms, ordered by commit time."""
    rows = (
        ledger.ledger_rows(spark, table)
        .where(F.col("status") == ledger.CREDITED)
        .select(
            (F.unix_micros("credited_at") / 1000 - F.unix_millis("committed_at")).alias("ms"),
            "committed_at",
        )
        .orderBy("committed_at")
        .collect()
    )
    return [float(r["ms"]) for r in rows]


def run_report(
    points_config: SparkJobConfig,
    telemetry_config: SparkJobConfig,
    spark: SparkSession | None = None,
) -> SparkReport:
    """Run the points and telemetry jobs with ``availableNow`` on one session; their results."""
    own = spark is None
    session = spark if spark is not None else build_session(points_config)
    try:
        points = run_points(points_config.with_(available_now=True), session)
        telemetry = run_telemetry(telemetry_config.with_(available_now=True), session)
        latency = commit_to_ledger_ms(session, points_config.table)
        return SparkReport(points=points, telemetry=telemetry, commit_to_ledger_ms=latency)
    finally:
        if own:
            session.stop()


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def format_report(report: SparkReport, *, top: int = 10) -> str:
    """The report as plain-text tables."""
    lines = ["points ledger (Delta, MERGE on msg_id)"]
    p = report.points
    lines.append(
        f"  {p.credited} payments credited, {p.rejected} rejected; this run read "
        f"{p.input_rows} messages in {p.batches} batches"
    )
    lines.append(f"  {'member':<24}{'points':>10}")
    for user, points in sorted(p.balances.items(), key=lambda kv: (-kv[1], kv[0]))[:top]:
        lines.append(f"  {user:<24}{points:>10,}")
    c = report.commit_to_ledger_ms
    if c:
        lines.append(
            f"  commit to ledger: p50 {_ms(report.commit_to_ledger_percentile(0.5))} ms, "
            f"p99 {_ms(report.commit_to_ledger_percentile(0.99))} ms, max {_ms(max(c))} ms, "
            f"mean {_ms(statistics.fmean(c))} ms"
        )
    t = report.telemetry
    lines.append("")
    lines.append("delay lateness (delivered - due), ms")
    lines.append(f"  {'level':>5}{'deliveries':>12}{'p50':>10}{'p99':>10}{'max':>10}")
    for row in t.lateness:
        lines.append(
            f"  {row.level:>5}{row.deliveries:>12}{_ms(row.p50_ms):>10}"
            f"{_ms(row.p99_ms):>10}{_ms(row.max_ms):>10}"
        )
    if not t.lateness:
        lines.append("  (no delayed message delivered)")
    lines.append("")
    lines.append("transactions per producer group")
    lines.append(
        f"  {'group':<28}{'txns':>6}{'commit':>8}{'rollbk':>8}{'discard':>8}{'pending':>8}"
        f"{'checks':>8}{'max chk':>8}{'commit p50':>12}"
    )
    for g in t.transactions:
        lines.append(
            f"  {g.producer_group[:27]:<28}{g.transactions:>6}{g.commits:>8}{g.rollbacks:>8}"
            f"{g.discards:>8}{g.pending:>8}{g.checks:>8}{g.max_checks_per_transaction:>8}"
            f"{_ms(g.commit_p50_ms):>10} ms"
        )
    if t.undecodable:
        lines.append(f"  {t.undecodable} system records did not decode (kept in the facts table)")
    return "\n".join(lines)


def draw_chart(report: SparkReport, path: Path) -> Path:
    """A PNG: lateness per delay level (p50, p99, max) and commit-to-ledger time per payment."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    levels = report.telemetry.lateness
    if levels:
        xs = list(range(len(levels)))
        width = 0.27
        for i, (label, values) in enumerate(
            (
                ("p50", [r.p50_ms for r in levels]),
                ("p99", [r.p99_ms for r in levels]),
                ("max", [r.max_ms for r in levels]),
            )
        ):
            left.bar([x + (i - 1) * width for x in xs], values, width, label=label)
        left.set_xticks(xs, [f"level {r.level}\n({r.deliveries})" for r in levels])
        left.legend()
    else:
        left.text(0.5, 0.5, "no delayed message delivered", ha="center", va="center")
    left.set_title("Delayed delivery lateness (delivered - due)")
    left.set_ylabel("ms")
    latency = report.commit_to_ledger_ms
    if latency:
        right.plot(range(1, len(latency) + 1), latency, marker="o", markersize=3, linewidth=1)
        p50 = report.commit_to_ledger_percentile(0.5)
        if p50 is not None:
            right.axhline(p50, color="grey", linestyle="--", label=f"p50 {p50:,.0f} ms")
            right.legend()
    else:
        right.text(0.5, 0.5, "no payment credited", ha="center", va="center")
    right.set_title("Commit to ledger, per payment")
    right.set_xlabel("payment (commit order)")
    right.xaxis.set_major_locator(MaxNLocator(integer=True))
    right.set_ylabel("ms")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
