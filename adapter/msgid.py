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

_HEX2 = tuple(f"{i:02X}" for i in range(256))


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
        self._prefix = (
            (_ipv4_bytes() + pid.to_bytes(2, "big") + secrets.token_bytes(4)).hex().upper()
        )
        self._month_start = _month_start_ms(time.time())
        self._counter = itertools.count()
        self._last_ms = -1
        self._head = ""

    def next_id(self) -> str:
        # Formatting is the cost on this hot path: the time part is formatted once per
        # millisecond and the counter through a table of two-digit hex strings.
        now_ms = int(time.time() * 1000)
        if now_ms != self._last_ms:
            self._last_ms = now_ms
            self._head = f"{self._prefix}{(now_ms - self._month_start) & 0xFFFFFFFF:08X}"
        n = next(self._counter)
        return self._head + _HEX2[(n >> 8) & 0xFF] + _HEX2[n & 0xFF]


_GENERATOR: MessageIdGenerator | None = None


def _forget_generator() -> None:
    global _GENERATOR
    _GENERATOR = None


os.register_at_fork(after_in_child=_forget_generator)


def new_message_id() -> str:
    """A fresh UNIQ_KEY. The generator is built on first use (and anew after a fork)."""
    global _GENERATOR
    generator = _GENERATOR
    if generator is None:
        generator = _GENERATOR = MessageIdGenerator()
    return generator.next_id()
