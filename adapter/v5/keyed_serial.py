"""Tasks run one after another per key, keys in parallel: a lite topic's messages in order.

A task submitted under a key waits for the key's earlier tasks; tasks of different keys run on
the pool's threads at the same time. Only keys with waiting tasks cost memory, so a consumer of
a million lite topics keeps no per-key state for the idle ones.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor

__all__ = ["KeyedSerial"]

log = logging.getLogger(__name__)


class KeyedSerial:
    """A thread pool that runs each key's tasks in submission order, one at a time."""

    def __init__(self, threads: int, name: str) -> None:
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix=name)
        self._lock = threading.Lock()
        self._queues: dict[Hashable, deque[Callable[[], None]]] = {}

    def submit(self, key: Hashable, task: Callable[[], None]) -> None:
        with self._lock:
            queue = self._queues.get(key)
            if queue is not None:
                queue.append(task)
                return
            self._queues[key] = deque([task])
        self._pool.submit(self._drain, key)

    def _drain(self, key: Hashable) -> None:
        while True:
            with self._lock:
                task = self._queues[key][0]
            try:
                task()
            except Exception:  # a task must not stop its key's later tasks
                log.exception("a task of %r failed", key)
            with self._lock:
                queue = self._queues[key]
                queue.popleft()
                if not queue:
                    del self._queues[key]
                    return

    def shutdown(self) -> None:
        """Wait for every task submitted, then stop the threads."""
        self._pool.shutdown(wait=True)
