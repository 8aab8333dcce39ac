"""Helpers shared by the test suites: one ``wait_until`` with a deadline, and a recorder."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    predicate: Callable[[], T], *, timeout: float = 30.0, interval: float = 0.05, what: str = ""
) -> T:
    """Return the predicate's first truthy value; fail the test when the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or predicate}")
        time.sleep(interval)


class Recorder:
    """A consumer callback that records what it saw, thread-safely."""

    def __init__(self, result: object = None) -> None:
        from adapter.client import ConsumeStatus

        self.result = ConsumeStatus.CONSUME_SUCCESS if result is None else result
        self.messages: list[object] = []
        self._lock = threading.Lock()

    def __call__(self, message: object) -> object:
        with self._lock:
            self.messages.append(message)
        return self.result

    @property
    def bodies(self) -> list[bytes]:
        with self._lock:
            return [m.body for m in self.messages]  # type: ignore[attr-defined]

    def __len__(self) -> int:
        with self._lock:
            return len(self.messages)
