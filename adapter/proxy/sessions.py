"""Client sessions: the live Telemetry streams, and which producer topics each one serves.

Reproduces the proxy's client registry (RocketMQ's ``ClientManager``/``ProducerManager``):
a client opens one Telemetry stream per proxy it talks to and announces itself in its
Settings (client type, the topics it publishes). A check-back of a producer group reaches a
live stream of that group; in RocketMQ 5 the group of a transactional message is its topic, so
a session serves the topics of its Settings and those it has sent transactional messages to.

Commands reach a session from any thread (the check responders run on their own): they are
queued onto the stream's event loop, and a stream that has ended takes none.

Known gaps: none.
"""

from __future__ import annotations

import asyncio
import logging
import random
import threading
from collections.abc import Iterable
from typing import Any

__all__ = ["Session", "Sessions"]

log = logging.getLogger(__name__)


class Session:
    """One client's Telemetry stream on this proxy."""

    def __init__(self, client_id: str, loop: asyncio.AbstractEventLoop) -> None:
        self.client_id = client_id
        self.client_type = 0
        self.topics: set[str] = set()
        self._loop = loop
        self.outbox: asyncio.Queue[Any] = asyncio.Queue()
        self.closed = False

    def push(self, command: Any) -> bool:
        """Queue ``command`` for the client (from any thread); False once the stream ended."""
        if self.closed:
            return False
        try:
            self._loop.call_soon_threadsafe(self.outbox.put_nowait, command)
        except RuntimeError:  # the loop is closed
            return False
        return True

    def end(self) -> None:
        """End the stream (from any thread): the client opens another, here or elsewhere."""
        if not self.closed:
            self.push(None)
            self.closed = True

    def __repr__(self) -> str:
        return f"<Session {self.client_id} type={self.client_type} topics={sorted(self.topics)}>"


class Sessions:
    """Every live session of this proxy, thread-safe."""

    def __init__(self) -> None:
        self._live: set[Session] = set()
        self._lock = threading.Lock()

    def add(self, session: Session) -> None:
        with self._lock:
            self._live.add(session)

    def remove(self, session: Session) -> None:
        with self._lock:
            self._live.discard(session)
        session.closed = True

    def announce(self, session: Session, client_type: int, topics: Iterable[str]) -> None:
        """``session``'s client is of ``client_type`` and publishes to ``topics`` (its
        Settings)."""
        with self._lock:
            session.client_type = client_type
            session.topics |= set(topics)

    def serve(self, client_id: str, topics: Iterable[str]) -> None:
        """The client ``client_id`` publishes to ``topics`` too (a transactional send)."""
        wanted = set(topics)
        with self._lock:
            for session in self._live:
                if session.client_id == client_id:
                    session.topics |= wanted

    def of_topic(self, topic: str) -> list[Session]:
        with self._lock:
            return [s for s in self._live if topic in s.topics and not s.closed]

    def any_of_topic(self, topic: str) -> Session | None:
        """A live session serving ``topic``, at random (RocketMQ picks any channel)."""
        found = self.of_topic(topic)
        return random.choice(found) if found else None  # noqa: S311 - not a secret

    def topics(self) -> set[str]:
        with self._lock:
            return {topic for s in self._live for topic in s.topics}

    def of_client(self, client_id: str) -> list[Session]:
        with self._lock:
            return [s for s in self._live if s.client_id == client_id]

    def __len__(self) -> int:
        with self._lock:
            return len(self._live)

    def end_all(self) -> None:
        with self._lock:
            live = list(self._live)
        for session in live:
            session.end()
