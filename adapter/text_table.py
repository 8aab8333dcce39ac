"""Plain-text tables for the terminal: the command line's and the Spark jobs' reports.

Not a RocketMQ behaviour: a person reads a table faster than lines of prose, and a fixed-width
one copies into an issue or a chat as it is.
"""

from __future__ import annotations

from collections.abc import Sequence


def table(header: Sequence[str], rows: Sequence[Sequence[object]], indent: str = "  ") -> list[str]:
    """Columns as wide as their widest cell; the first left-aligned, the others right."""
    cells = [[str(c) for c in row] for row in [header, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]

    def line(row: list[str]) -> str:
        first = row[0].ljust(widths[0])
        rest = [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        return (indent + "  ".join([first, *rest])).rstrip()

    return [line(row) for row in cells]
