"""Message ids in the shape of RocketMQ's ``UNIQ_KEY``.

Reproduces ``MessageClientIDSetter``: 32 upper-case hex characters, a fixed per-process prefix
(IPv4 address, process id, a random salt) followed by the milliseconds since the start of the
current month and a 16-bit counter, so ids sort roughly by time within a process and do not
collide across processes.

Known gaps: the prefix uses a random salt where Java uses the class loader's hash code.
"""

from __future__ import annotations

import itertools
import os
import secrets
import socket
import time
from datetime import UTC, datetime


def _ipv4_bytes() -> bytes:
    try:
        return socket.inet_aton(socket.gethostbyname(socket.gethostname()))
    except OSError:
        return bytes([127, 0, 0, 1])


def _month_start_ms(now: float) -> int:
    t = datetime.fromtimestamp(now, tz=UTC)
    start = t.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return int(start.timestamp() * 1000)


class MessageIdGenerator:
    """Thread-safe under the GIL: ``itertools.count`` hands out each value once."""

    def __init__(self) -> None:
        pid = os.getpid() & 0xFFFF
        self.pid = os.getpid()
        self._prefix = (
            (_ipv4_bytes() + pid.to_bytes(2, "big") + secrets.token_bytes(4)).hex().upper()
        )
        self._month_start = _month_start_ms(time.time())
        self._counter = itertools.count()

    def next_id(self) -> str:
        elapsed = (int(time.time() * 1000) - self._month_start) & 0xFFFFFFFF
        return f"{self._prefix}{elapsed:08X}{next(self._counter) & 0xFFFF:04X}"


_GENERATOR: MessageIdGenerator | None = None


def new_message_id() -> str:
    """A fresh UNIQ_KEY. The generator is built on first use, not at import."""
    global _GENERATOR
    if _GENERATOR is None or _GENERATOR.pid != os.getpid():  # rebuilt after fork
        _GENERATOR = MessageIdGenerator()
    return _GENERATOR.next_id()
