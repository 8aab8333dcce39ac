"""The Spark driver JVM's console, as Python log records.

Not a RocketMQ behaviour: the product's terminal speaks through Python logging only. PySpark
starts the driver JVM (``spark-submit``) on the Python process's own standard error, so
whatever the JVM prints lands raw in the terminal, between the job's structured lines. Here
that standard error is a pipe instead, read on a daemon thread: each line becomes a record of
the ``adapter.spark.jvm`` logger, at the level log4j gave it (``log4j2.properties`` prints
``HH:mm:ss.SSS LEVEL Logger: message``), with the Java logger's name in ``jvm_logger``. The
lines of an exception's trace keep the level of the line that began it. The JVM launcher's
notice ``WARNING: Using incubator modules: jdk.incubator.vector`` (Spark 4 adds that module to
every JVM it starts) is DEBUG: it is not about the job.

:func:`parse_line` is pure; :func:`forward` is the thread's loop.

Known gaps: only the driver JVM that this process launches; executors on a cluster log where
their Spark worker puts them. Lines are forwarded one by one (a trace is many records).
"""

from __future__ import annotations

import logging
import re
import threading
from typing import IO

log = logging.getLogger("adapter.spark.jvm")

_LOG4J = re.compile(
    r"^\d{2}:\d{2}:\d{2}\.\d{3} (?P<level>TRACE|DEBUG|INFO|WARN|ERROR|FATAL) "
    r"(?P<logger>[^:\s]+): (?P<message>.*)$"
)
_LEVELS = {
    "TRACE": logging.DEBUG,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
}
_LAUNCHER_NOTICES = ("WARNING: Using incubator modules:",)


def parse_line(line: str, previous_level: int) -> tuple[int, str, str]:
    """``(level, java logger, message)`` of one line of the JVM's standard error.

    A log4j line carries its own level; the JVM launcher's incubator notice is DEBUG; any other
    line (a trace, a continuation) keeps ``previous_level``, with an empty logger name.
    """
    found = _LOG4J.match(line)
    if found is not None:
        return _LEVELS[found["level"]], found["logger"], found["message"]
    if line.startswith(_LAUNCHER_NOTICES):
        return logging.DEBUG, "", line
    return previous_level, "", line


def forward(stream: IO[bytes]) -> None:
    """Log every line of ``stream`` until it ends (the JVM exited)."""
    level = logging.WARNING
    with stream:
        for raw in iter(stream.readline, b""):
            text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if not text:
                continue
            level, java_logger, message = parse_line(text, level)
            log.log(level, message, extra={"jvm_logger": java_logger} if java_logger else None)


def forward_in_background(stream: IO[bytes]) -> threading.Thread:
    thread = threading.Thread(target=forward, args=(stream,), name="spark-jvm-log", daemon=True)
    thread.start()
    return thread
