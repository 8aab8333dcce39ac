"""The ``Telemetry`` stream: the session every client keeps open with the proxy.

Reproduces the proxy side of RocketMQ 5's ``Telemetry`` (``ClientActivity.telemetry``):

- the client sends its ``Settings`` (at start, then every few minutes) and the proxy answers
  with the settings it is to use, which the clients wait for before ``startup()`` returns:
  for a producer its topics, the body size limit (4 MiB), message-type validation on, and a
  retry policy (the client's own exponential back-off, or 3 attempts from 10 ms up to 1 s);
  for a consumer its group's retry policy (17 attempts, the delay levels' durations: a push
  consumer's failed message comes back after 1 s, 5 s, 10 s, ...), whether the group is FIFO
  (``--fifo-groups``), a receive batch of 32 and a long poll of 20 s unless the client asked
  for up to 30 s;
- the proxy pushes commands down it: here ``RecoverOrphanedTransactionCommand``, a check-back
  (:mod:`adapter.proxy.transactions`);
- thread stack traces and message verification results the client sends are taken and logged;
  anything else is answered with a ``BAD_REQUEST`` status, and the stream goes on.

The stream ends when the client ends it, on ``NotifyClientTermination``, or when the proxy
stops; a client then opens a new one (here or at another proxy).

Known gaps: a group is answered with 17 attempts, whatever the Kafka broker's delivery count
limit allows a share group.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from google.protobuf.duration_pb2 import Duration

from adapter import naming
from adapter.delay import DelayLevels
from adapter.proxy.codes import Code, status
from adapter.proxy.protocol import definition, service
from adapter.proxy.sessions import Session, Sessions

__all__ = ["Telemetry", "answer_settings"]

log = logging.getLogger(__name__)

DEFAULT_ATTEMPTS = 3
CONSUMER_ATTEMPTS = 17
RECEIVE_BATCH_SIZE = 32
LONG_POLLING_S = 20
MAX_LONG_POLLING_S = 30


def _default_backoff() -> Any:
    return definition.RetryPolicy(
        max_attempts=DEFAULT_ATTEMPTS,
        exponential_backoff=definition.ExponentialBackoff(
            initial=Duration(nanos=10_000_000), max=Duration(seconds=1), multiplier=2.0
        ),
    )


def consumer_backoff(levels: DelayLevels) -> Any:
    """A consumer group's retry policy, as RocketMQ's proxy sends it: 17 attempts
    (``retryMaxTimes`` + 1) and the delay-level table's durations, which a push consumer uses
    as the invisible duration after its n-th failed delivery."""
    backoff = definition.CustomizedBackoff()
    for ms in levels.delays_ms:
        backoff.next.add(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)
    return definition.RetryPolicy(max_attempts=CONSUMER_ATTEMPTS, customized_backoff=backoff)


_CONSUMERS = {
    definition.ClientType.PUSH_CONSUMER,
    definition.ClientType.SIMPLE_CONSUMER,
    definition.ClientType.PULL_CONSUMER,
}


def answer_settings(
    sent: Any,
    *,
    max_body_size: int,
    levels: DelayLevels | None = None,
    fifo_groups: frozenset[str] = frozenset(),
) -> Any:
    """The settings a client is to use, for the ``Settings`` it sent."""
    answer = definition.Settings()
    answer.CopyFrom(sent)
    answer.metric.Clear()
    answer.metric.on = False
    if sent.client_type == definition.ClientType.PRODUCER or sent.HasField("publishing"):
        answer.publishing.max_body_size = max_body_size
        answer.publishing.validate_message_type = True
        policy = sent.backoff_policy
        if policy.WhichOneof("strategy") != "exponential_backoff" or policy.max_attempts <= 0:
            answer.backoff_policy.CopyFrom(_default_backoff())
    elif sent.client_type in _CONSUMERS or sent.HasField("subscription"):
        answer.backoff_policy.CopyFrom(consumer_backoff(levels or DelayLevels.parse()))
        subscription = answer.subscription
        group = subscription.group
        subscription.fifo = (
            naming.with_namespace(group.resource_namespace, group.name) in fifo_groups
        )
        if subscription.receive_batch_size <= 0:
            subscription.receive_batch_size = RECEIVE_BATCH_SIZE
        polling = subscription.long_polling_timeout
        if polling.seconds <= 0 or polling.seconds > MAX_LONG_POLLING_S:
            polling.CopyFrom(Duration(seconds=LONG_POLLING_S))
    return answer


class Telemetry:
    """Serves Telemetry streams: one :class:`Session` each."""

    def __init__(
        self,
        sessions: Sessions,
        *,
        max_body_size: int,
        on_publishing: Callable[[Iterable[str]], None],
        fifo_groups: frozenset[str] = frozenset(),
    ) -> None:
        self._sessions = sessions
        self._max_body_size = max_body_size
        self._fifo_groups = fifo_groups
        self._on_publishing = on_publishing

    async def stream(self, requests: AsyncIterator[Any], client_id: str) -> AsyncIterator[Any]:
        """The commands for the client, while it sends its own on ``requests``."""
        session = Session(client_id, asyncio.get_running_loop())
        self._sessions.add(session)
        reader = asyncio.create_task(self._read(requests, session))
        try:
            while True:
                command = await session.outbox.get()
                if command is None:
                    return
                yield command
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
            self._sessions.remove(session)

    async def _read(self, requests: AsyncIterator[Any], session: Session) -> None:
        try:
            async for command in requests:
                self._take(command, session)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a cut stream ends the session, never more
            log.info("telemetry stream of %s ended: %s", session.client_id, exc)
        session.end()

    def _take(self, command: Any, session: Session) -> None:
        kind = command.WhichOneof("command")
        if kind == "settings":
            settings = command.settings
            topics = set()
            if settings.HasField("publishing"):
                topics = {
                    naming.with_namespace(t.resource_namespace, t.name)
                    for t in settings.publishing.topics
                    if t.name
                }
            self._sessions.announce(session, int(settings.client_type), topics)
            if topics:
                self._on_publishing(topics)
            answer = answer_settings(
                settings, max_body_size=self._max_body_size, fifo_groups=self._fifo_groups
            )
            session.push(service.TelemetryCommand(status=status(), settings=answer))
        elif kind in ("thread_stack_trace", "verify_message_result"):
            log.info("client %s sent %s", session.client_id, kind)
        elif kind is None and command.HasField("status"):  # a Malformed one has neither
            log.debug("client %s sent status %s", session.client_id, command.status.code)
        else:
            why = f"a client does not send {kind}" if kind else "a command that does not parse"
            session.push(service.TelemetryCommand(status=status(Code.BAD_REQUEST, why)))
