"""A worker whose wall clock reads off by what a file says: the chaos run's clock-skew fault.

``python -m tests.chaos.skewed_worker SKEW_FILE <rmq-adapter arguments>`` runs the adapter's
command with :class:`adapter.clock.SystemClock` reading ``SKEW_FILE`` (milliseconds, ``0`` when
absent) at most twice a second and adding it to the wall clock. Every time decision the adapter
makes (a check-back due, a delay or timer over) reads that clock; the monotonic clock and
Kafka's own timestamps are left alone, as on a host whose NTP has drifted.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from adapter.clock import SystemClock

REREAD_S = 0.5


def skew_from(path: Path) -> None:
    """Make every :class:`SystemClock` read ``path``'s skew."""
    wall = SystemClock.now_ms
    read_at, skew_ms = -REREAD_S, 0

    def now_ms(self: SystemClock) -> int:
        nonlocal read_at, skew_ms
        if time.monotonic() - read_at >= REREAD_S:
            read_at = time.monotonic()
            try:
                skew_ms = int(path.read_text() or 0)
            except (OSError, ValueError):
                skew_ms = 0
        return wall(self) + skew_ms

    SystemClock.now_ms = now_ms  # type: ignore[method-assign]


def main() -> None:
    skew_from(Path(sys.argv[1]))
    sys.argv = ["rmq-adapter", *sys.argv[2:]]
    from adapter.ops.cli import main as command

    command()


if __name__ == "__main__":
    main()
