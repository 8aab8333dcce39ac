"""Both jobs run once (``availableNow``) with their results as Python data, a text report and
a PNG chart, for the demo.

Reproduces nothing of RocketMQ: it is the view a person gets of the two jobs. The points job
credits what was committed; the telemetry job measures the adapter; :func:`run_report` runs
both on one session and adds the commit-to-ledger time of each credited payment (credited_at,
when its batch was merged, minus committed_at, when its commit reached the topic).
:func:`format_report` prints the tables; :func:`draw_chart` draws lateness per delay level and
commit-to-ledger time with matplotlib (a pinned dependency of the ``spark`` extra): each bar
names its sample count and value, a zero is drawn as a visible mark, and the payments of a
first MERGE into a ledger that already held rows are marked when they were slow (cold code
paths of the JVM: seconds, once per job).

A streaming job that knows when each batch's MERGE returned (its ``BatchOutcome.merged_at``,
as the demo does) gives those times to :func:`commit_to_ledger`, which then measures until the
rows were readable in the ledger.

Known gaps: without those times, ``credited_at`` (when the batch began) stands in, short of the
time until the rows are readable by the batch's own duration; ``bench/spark.py`` measures the
full time from the producer's commit to the MERGE's return.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from adapter.spark import ledger
from adapter.spark.config import SparkJobConfig
from adapter.spark.points import PointsResult, run_points
from adapter.spark.results import (
    BandLateness,
    LevelLateness,
    format_lateness,
    format_points,
    format_transactions,
)
from adapter.spark.session import build_session, stop_session
from adapter.spark.telemetry import TelemetryResult, run_telemetry


@dataclass(frozen=True, slots=True)
class SparkReport:
    points: PointsResult
    telemetry: TelemetryResult
    commit_to_ledger_ms: list[float]
    """One value per credited ledger row, in commit order."""
    ledger_batches: list[int] = field(default_factory=list)
    """The ledger batch of each value of :attr:`commit_to_ledger_ms` (empty: not known)."""

    def commit_to_ledger_percentile(self, q: float) -> float | None:
        return _percentile(self.commit_to_ledger_ms, q)

    def cold_merge(self) -> tuple[int, list[int]] | None:
        """The first batch whose payments took over twice the others' median, and the indexes
        of its payments: a batch whose code paths ran for the first time in the JVM (the first
        MERGE into a ledger that holds rows, unless warmed). Only the first two batches are
        looked at; None when no batch stands out, or there is only one."""
        by_batch: dict[int, list[int]] = {}
        for i, batch in enumerate(self.ledger_batches):
            by_batch.setdefault(batch, []).append(i)
        for batch in sorted(by_batch)[:2]:
            slow = [self.commit_to_ledger_ms[i] for i in by_batch[batch]]
            others = others_of(self.commit_to_ledger_ms, by_batch[batch])
            if others and min(slow) > 2 * statistics.median(others):
                return batch, by_batch[batch]
        return None


def others_of(values: list[float], excluded: list[int]) -> list[float]:
    return [v for i, v in enumerate(values) if i not in excluded]


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def commit_to_ledger(
    spark: SparkSession, table: Path, merged_ms: Mapping[int, float] | None = None
) -> tuple[list[float], list[int]]:
    """Per credited row, in ms, ordered by commit time: from committed_at to when its batch's
    MERGE returned (``merged_ms``: batch id -> epoch ms), or else to its credited_at; and the
    ledger batch of each."""
    rows = (
        ledger.ledger_rows(spark, table)
        .where(F.col("status") == ledger.CREDITED)
        .select(
            (F.unix_micros("credited_at") / 1000).alias("credited_ms"),
            F.unix_millis("committed_at").alias("committed_ms"),
            "batch_id",
        )
        .orderBy("committed_at")
        .collect()
    )
    merged = merged_ms or {}
    latency = [
        float(merged.get(int(r["batch_id"]), r["credited_ms"]) - r["committed_ms"]) for r in rows
    ]
    return latency, [int(r["batch_id"]) for r in rows]


def commit_to_ledger_ms(spark: SparkSession, table: Path) -> list[float]:
    """credited_at - committed_at of each credited row, in ms, ordered by commit time."""
    return commit_to_ledger(spark, table)[0]


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
        latency, batches = commit_to_ledger(session, points_config.table)
        return SparkReport(points, telemetry, latency, batches)
    finally:
        if own:
            stop_session(session)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def format_report(report: SparkReport, *, top: int = 10) -> str:
    """The report as plain-text tables."""
    lines = format_points(report.points, top=top).splitlines()
    c = report.commit_to_ledger_ms
    if c:
        lines.append(
            f"  commit to ledger: p50 {_ms(report.commit_to_ledger_percentile(0.5))} ms, "
            f"p99 {_ms(report.commit_to_ledger_percentile(0.99))} ms, max {_ms(max(c))} ms, "
            f"mean {_ms(statistics.fmean(c))} ms"
        )
    cold = report.cold_merge()
    if cold is not None:
        slow = [c[i] for i in cold[1]]
        lines.append(
            f"  the {len(slow)} payment(s) of batch {cold[0]} took {_ms(min(slow))}-"
            f"{_ms(max(slow))} ms, the others {_ms(statistics.median(others_of(c, cold[1])))} ms "
            "at the median: its code paths ran for the first time in the JVM (once a job)"
        )
    t = report.telemetry
    lines += ["", *format_lateness(t), "", *format_transactions(t)]
    if t.undecodable:
        lines.append(f"  {t.undecodable} system records did not decode (kept in the facts table)")
    return "\n".join(lines)


def _bars(axis: Any, report: SparkReport) -> None:
    """Lateness per delay level and per timer band: p50, p99 and max, each bar with its value,
    each group with its sample count; a value of 0 is a visible mark on the axis."""
    groups: list[tuple[str, int, LevelLateness | BandLateness]] = [
        (f"level {r.level}", r.deliveries, r) for r in report.telemetry.lateness
    ]
    groups += [(f"timer {r.label}", r.deliveries, r) for r in report.telemetry.timers]
    if not groups:
        axis.text(0.5, 0.5, "no delayed message delivered", ha="center", va="center")
        return
    xs = list(range(len(groups)))
    width = 0.27
    top = max(max(g[2].max_ms for g in groups), 1.0)
    for i, (label, attribute) in enumerate(
        (("p50", "p50_ms"), ("p99", "p99_ms"), ("max", "max_ms"))
    ):
        values = [float(getattr(g[2], attribute)) for g in groups]
        places = [x + (i - 1) * width for x in xs]
        bars = axis.bar(places, values, width, label=label)
        colour = bars.patches[0].get_facecolor() if bars.patches else None
        for x, value in zip(places, values, strict=True):
            if value == 0:  # a bar of height 0 draws nothing: mark it
                axis.plot([x - width / 2, x + width / 2], [0, 0], color=colour, linewidth=3)
            axis.annotate(
                f"{value:,.0f}", (x, max(value, 0)), xytext=(0, 2), textcoords="offset points",
                ha="center", va="bottom", fontsize=7,
            )  # fmt: skip
    axis.set_xticks(
        xs, [f"{label}\n{n} sample{'' if n == 1 else 's'}" for label, n, _ in groups], fontsize=8
    )
    axis.set_ylim(min(0.0, axis.get_ylim()[0]), top * 1.18)
    axis.axhline(0, color="black", linewidth=0.6)
    axis.legend(fontsize=8)


def _latency(axis: Any, report: SparkReport) -> None:
    """Commit-to-ledger per payment, its median, and the cold first MERGE marked."""
    latency = report.commit_to_ledger_ms
    if not latency:
        axis.text(0.5, 0.5, "no payment credited", ha="center", va="center")
        return
    xs = list(range(1, len(latency) + 1))
    axis.plot(xs, latency, marker="o", markersize=3, linewidth=1)
    p50 = report.commit_to_ledger_percentile(0.5)
    if p50 is not None:
        axis.axhline(p50, color="grey", linestyle="--", label=f"p50 {p50:,.0f} ms")
    cold = report.cold_merge()
    if cold is not None:
        points = [(xs[i], latency[i]) for i in cold[1]]
        axis.scatter(*zip(*points, strict=True), s=40, facecolors="none", edgecolors="red")
        x, y = max(points, key=lambda p: p[1])
        axis.annotate(
            f"batch {cold[0]}: code paths run for the\nfirst time in the JVM (once a job)",
            (x, y), xytext=(-12, -6), textcoords="offset points", fontsize=8, color="red",
            ha="right", va="top", arrowprops={"arrowstyle": "->", "color": "red"},
        )  # fmt: skip
    axis.legend(fontsize=8)


def draw_chart(report: SparkReport, path: Path) -> Path:
    """A PNG: lateness per delay level and timer band, and commit-to-ledger per payment."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.6))
    _bars(left, report)
    left.set_title("Delayed delivery lateness (delivered - due)")
    left.set_ylabel("ms")
    _latency(right, report)
    right.set_title("Commit to ledger, per payment")
    right.set_xlabel("payment (commit order)")
    right.xaxis.set_major_locator(MaxNLocator(integer=True))
    right.set_ylabel("ms")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
