"""The clock every time-dependent part of the adapter reads, injected rather than global.

Not a RocketMQ behaviour: RocketMQ's broker reads ``System.currentTimeMillis()`` wherever it needs
the time. Here the workers, the transactional producer and the admin commands take a
:class:`Clock`, so their timing (check-back due times, delay lateness, back-off) can be driven by
a test through :class:`ManualClock` instead of by sleeping.

Known gaps: Kafka's own timestamps (LogAppendTime, CreateTime) come from the broker's and the
client's wall clocks; a manual clock only moves the adapter's side.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock time, epoch milliseconds (compared with Kafka record timestamps)."""
        ...

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (deadlines, intervals)."""
        ...


class SystemClock:
    """The machine's clocks."""

    __slots__ = ()

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()


SYSTEM_CLOCK = SystemClock()


class ManualClock:
    """A clock that moves only when told to (tests); both readings move together."""

    def __init__(self, now_ms: int | None = None) -> None:
        self._now_ms = SYSTEM_CLOCK.now_ms() if now_ms is None else now_ms
        self._monotonic = 0.0
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        with self._lock:
            return self._now_ms

    def monotonic(self) -> float:
        with self._lock:
            return self._monotonic

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError(f"a manual clock does not go back ({ms} ms)")
        with self._lock:
            self._now_ms += ms
            self._monotonic += ms / 1000
