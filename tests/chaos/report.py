"""A chaos run's report: the checker's counts, recovery times per fault type, and a chart of
the lateness of delayed messages and timers over the run with the fault windows shaded."""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

from adapter.text_table import table
from tests.chaos.checker import Verdict
from tests.chaos.history import History, Kind, Outcome


def text(history: History, verdict: Verdict, minutes: float) -> str:
    recalls = [op for op in history.operations if op.kind is Kind.RECALL]
    counts = [
        ("operations", len(history.operations)),
        ("timers recalled (never to be delivered)", sum(not op.committed for op in recalls)),
        (
            "recalls refused (delivered already)",
            sum(op.committed and op.outcome is Outcome.OK for op in recalls),
        ),
        ("acknowledged (to be delivered)", verdict.acknowledged),
        ("deliveries seen", verdict.delivered),
        ("lost", len(verdict.lost)),
        ("duplicated", len(verdict.duplicated)),
        ("unexpected", len(verdict.unexpected)),
        ("early", len(verdict.early)),
        ("out of order", len(verdict.out_of_order)),
        ("recovered (unknown outcome, delivered)", len(verdict.recovered)),
        ("redelivered to an at-least-once group", len(verdict.redelivered)),
        ("sends stored twice (at least once, as RocketMQ's)", len(verdict.sent_twice)),
    ]
    lines = [
        f"chaos run: {minutes:g} minutes, {len(history.faults)} faults; "
        f"verdict: {'OK' if verdict.ok else 'FAILED'}",
        "",
        *table(("what", "count"), counts),
        "",
        "recovery: seconds from a fault's heal to the first successful operation of each kind "
        "invoked after it (median / max over the faults of that type)",
        *table(("fault", "n", *(k.value for k in Kind)), _recoveries(verdict)),
    ]
    sends = {op.key: op for op in history.operations}
    duplicated = [
        (*item, sends[item[1]].outcome.value if item[1] in sends else "never sent")
        for item in verdict.duplicated
    ]
    for label, items in (
        ("lost", verdict.lost),
        ("duplicated (group, key, times, the send's outcome)", duplicated),
        ("unexpected", verdict.unexpected),
        ("early", verdict.early),
        ("out of order", verdict.out_of_order),
    ):
        if items:
            lines += ["", f"{label} (first 20):", *(f"  {item}" for item in items[:20])]
    return "\n".join(lines) + "\n"


def _recoveries(verdict: Verdict) -> list[tuple[object, ...]]:
    by_type: dict[str, list[dict[Kind, float | None]]] = defaultdict(list)
    for recovery in verdict.recoveries:
        by_type[recovery.fault.split(" ")[0]].append(recovery.first_ok_s)
    rows: list[tuple[object, ...]] = []
    for fault, runs in sorted(by_type.items()):
        cells: list[object] = [fault, len(runs)]
        for kind in Kind:
            seen = [r[kind] for r in runs if r.get(kind) is not None]
            never = sum(1 for r in runs if kind in r and r[kind] is None)
            if not seen:
                cells.append("-" if not never else f"never ({never})")
                continue
            cell = f"{statistics.median(seen):.1f} / {max(seen):.1f}"  # type: ignore[type-var]
            cells.append(cell + (f", never {never}" if never else ""))
        rows.append(tuple(cells))
    return rows


def chart(history: History, path: Path, group: str = "push") -> None:
    """Lateness (first delivery to ``group`` less its due time) of delayed messages and timers
    against the run's time, fault windows shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    start = min((op.invoked_s for op in history.operations), default=0.0)
    due = {op.key: (op.kind, op.due_s) for op in history.operations if op.due_s is not None}
    first: dict[str, float] = {}
    for delivery in history.deliveries:
        if delivery.consumer == group and delivery.key in due:
            first.setdefault(delivery.key, delivery.at_s)
    figure, axes = plt.subplots(figsize=(10, 4), dpi=100)
    for fault in history.faults:
        axes.axvspan(fault.started_s - start, fault.healed_s - start, color="#f4cccc", lw=0)
    for kind, colour in ((Kind.DELAY, "#1f77b4"), (Kind.TIMER, "#2ca02c")):
        points = [
            (at - start, at - when)
            for key, at in first.items()
            if (k := due[key])[0] is kind and (when := k[1]) is not None
        ]
        if points:
            xs, ys = zip(*sorted(points), strict=True)
            axes.scatter(xs, ys, s=4, color=colour, label=f"{kind.value}s")
    axes.set_xlabel("seconds into the run (shaded: a fault in place)")
    axes.set_ylabel("delivered after its due time, s")
    axes.set_title("Lateness of delayed messages and timers under faults")
    axes.legend(loc="upper right")
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
