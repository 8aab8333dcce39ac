"""Structured logs: one JSON object per line, for workers and the CLI.

Not a RocketMQ behaviour. Each line has ``ts``, ``level``, ``logger`` and ``msg``, plus any
``extra={...}`` fields the caller passed, so log pipelines can index them without parsing text.
"""

from __future__ import annotations

import json
import logging
import sys
import time

_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


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
