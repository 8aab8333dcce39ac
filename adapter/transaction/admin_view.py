"""What ``rmq-adapter transactions list`` prints: a table a person reads, or JSON a script reads.

Not a RocketMQ behaviour by itself: RocketMQ's operators read pending transactions as counts per
topic; here each pending or discarded half message is a row (:class:`~.admin.Row`), filtered
by producer group and topic. Pure: rows and the time in, text out.

Known gaps: none.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable

from adapter.transaction.admin import Row


def select(rows: Iterable[Row], *, group: str | None = None, topic: str | None = None) -> list[Row]:
    """The rows of producer group ``group`` and real topic ``topic`` (either None: any)."""
    return [
        row
        for row in rows
        if (group is None or row.producer_group == group) and (topic is None or row.topic == topic)
    ]


def _age(ms: int) -> str:
    seconds = max(0, ms) // 1000
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def render(rows: list[Row], *, discarded: bool = False, now_ms: int) -> str:
    """A plain-text table."""
    last = "reason" if discarded else "half"
    head = f"{'transaction id':<34}  {'group':<24}  {'topic':<24}  {'age':>5}  {'checks':>6}  "
    if discarded:
        head += f"{'resumed':<10}  {'since then':<15}  "
    lines = [head + last]
    for row in rows:
        line = (
            f"{row.transaction_id:<34}  {row.producer_group:<24}  {row.topic:<24}  "
            f"{_age(now_ms - row.born_ms):>5}  {row.check_times:>6}  "
        )
        if discarded:
            resumed = (
                f"{_age(now_ms - row.resumed_at_ms)} ago" if row.resumed_at_ms is not None else "-"
            )
            line += f"{resumed:<10}  {row.outcome or '-':<15}  {row.reason or ''}"
        else:
            line += f"{row.partition}@{row.offset}"
        lines.append(line.rstrip())
    if not rows:
        lines.append("  (none)")
    return "\n".join(lines)


def as_json(rows: list[Row], *, now_ms: int, skipped: Iterable[str] = ()) -> str:
    """``{"transactions": [...], "skipped": [...]}``: every field of each row, and its age."""
    listed = [{**dataclasses.asdict(row), "age_ms": max(0, now_ms - row.born_ms)} for row in rows]
    return json.dumps({"transactions": listed, "skipped": list(skipped)}, indent=2)
