"""Message ids in the shape of RocketMQ's ``UNIQ_KEY``, never repeated within a process.

Reproduces ``MessageClientIDSetter``: 32 upper-case hex characters, a per-process prefix
(IPv4 address, process id, a random salt) followed by the milliseconds since the start of a
month and a 16-bit counter, so ids sort roughly by time within a process and do not collide
across processes (the salt tells apart processes, forks and containers sharing a pid).

Beyond RocketMQ: the time part has 32 bits, so it wraps 49.7 days after the month start it
counts from, and a clock that steps back writes time parts already used; either way the
counter would repeat ids already issued (the Spark ledger dedupes on the id, so a repeat loses
a message). The generator draws a new salt, and counts from the current month, when the time
part would wrap or the clock goes back.

Known gaps: the prefix uses a random salt where Java uses the class loader's hash code. A
process cannot issue 65,536 ids in one millisecond (CPython makes a few thousand); the counter
would wrap within it.
"""

from __future__ import annotations

import itertools
import os
import secrets
import socket
import threading
from datetime import UTC, datetime

from adapter.clock import SYSTEM_CLOCK, Clock

_HEX2 = tuple(f"{i:02X}" for i in range(256))
TIME_SPAN_MS = 1 << 32
"""The time part's range: it counts milliseconds from a month's start, modulo this."""


def _ipv4_bytes() -> bytes:
    try:
        return socket.inet_aton(socket.gethostbyname(socket.gethostname()))
    except OSError:
        return bytes([127, 0, 0, 1])


def _month_start_ms(now_ms: int) -> int:
    t = datetime.fromtimestamp(now_ms / 1000, tz=UTC)
    start = t.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return int(start.timestamp() * 1000)


class MessageIdGenerator:
    """Thread-safe: ``itertools.count`` hands out each value once under the GIL, and a change
    of millisecond (rare next to the ids) is made under a lock."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._host = _ipv4_bytes() + (os.getpid() & 0xFFFF).to_bytes(2, "big")
        self._lock = threading.Lock()
        self._counter = itertools.count()
        self.salts = 0
        """How many salts this generator has drawn (1, plus one per wrap or step back)."""
        now_ms = clock.now_ms()
        self._prefix, self._base_ms, self._high_ms = "", 0, now_ms
        self._new_prefix(now_ms)
        self._last_ms = now_ms
        self._head = self._head_at(now_ms)

    def next_id(self) -> str:
        # Formatting is the cost on this hot path: the time part is formatted once per
        # millisecond and the counter through a table of two-digit hex strings.
        now_ms = self._clock.now_ms()
        if now_ms != self._last_ms:
            self._move_to(now_ms)
        n = next(self._counter)
        return self._head + _HEX2[(n >> 8) & 0xFF] + _HEX2[n & 0xFF]

    def _move_to(self, now_ms: int) -> None:
        with self._lock:
            now_ms = self._clock.now_ms()  # read again under the lock: readings are ordered
            if now_ms < self._high_ms or now_ms - self._base_ms >= TIME_SPAN_MS:
                self._new_prefix(now_ms)  # the clock went back, or the time part would wrap
            self._high_ms = now_ms
            self._head = self._head_at(now_ms)
            self._last_ms = now_ms

    def _new_prefix(self, now_ms: int) -> None:
        self._prefix = (self._host + secrets.token_bytes(4)).hex().upper()
        self._base_ms = _month_start_ms(now_ms)
        self.salts += 1

    def _head_at(self, now_ms: int) -> str:
        return f"{self._prefix}{now_ms - self._base_ms:08X}"


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
