"""Structured logs: one JSON object per line, and a limiter for repeated lines.

Not a RocketMQ behaviour. Each line has ``ts``, ``level``, ``logger`` and ``msg``, plus any
``extra={...}`` fields the caller passed, so log pipelines can index them without parsing text.
:class:`RepeatLimiter` lets the first of a run of identical lines through, holds the rest back
for a window, and then lets one line through that says how many were held back: a broker that
is down for a minute costs a few lines, not thousands (librdkafka repeats its connection
errors every few hundred milliseconds, see :mod:`adapter.kafka.clients`).

Known gaps: held-back lines are summarised only when the next one of their kind arrives.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from collections.abc import Callable

_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        line.update({k: v for k, v in record.__dict__.items() if k not in _STANDARD})
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure(level: str = "INFO") -> None:
    """JSON lines on standard output (workers run in the foreground, often in containers)."""
    handler = logging.StreamHandler(sys.stdout)
    formatter = JsonFormatter()
    formatter.converter = time.gmtime
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


_NUMBERS = re.compile(r"\d+")


def shape(text: str) -> str:
    """A line with its numbers blanked: lines that differ only in counters and times match."""
    return _NUMBERS.sub("#", text)


class RepeatLimiter:
    """Decides, per key, whether a line is shown: the first of a kind, then at most one per
    ``window_s``, which carries the count of the lines held back since the last one shown."""

    def __init__(self, window_s: float = 30.0, monotonic: Callable[[], float] = time.monotonic):
        self.window_s = window_s
        self._monotonic = monotonic
        self._seen: dict[object, tuple[float, int]] = {}
        self._lock = threading.Lock()

    def admit(self, key: object) -> int | None:
        """``None`` to hold the line back; otherwise how many like it were held back before."""
        now = self._monotonic()
        with self._lock:
            seen = self._seen.get(key)
            if seen is None or now - seen[0] >= self.window_s:
                self._seen[key] = (now, 0)
                if len(self._seen) > 10_000:  # a flood of distinct lines: forget the oldest
                    oldest = min(self._seen, key=lambda k: self._seen[k][0])
                    del self._seen[oldest]
                return 0 if seen is None else seen[1]
            self._seen[key] = (seen[0], seen[1] + 1)
            return None
