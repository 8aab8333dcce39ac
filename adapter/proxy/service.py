"""``apache.rocketmq.v2.MessagingService``: each RPC, checked, answered and counted.

Every RPC goes through one path: the caller is authenticated (:mod:`adapter.proxy.auth`), the
work is done (blocking work on the proxy's threads, never on the event loop), and whatever it
raises becomes the response's status (:mod:`adapter.proxy.codes`); the answer is counted by
method and code with its latency. A request that cannot be parsed is refused by gRPC itself;
nothing a client sends stops the proxy.

Served: ``QueryRoute``, ``Heartbeat``, ``Telemetry``, ``SendMessage``, ``EndTransaction``,
``RecallMessage``, ``NotifyClientTermination``, the push consumer's ``QueryAssignment``, and
the consumers' ``ReceiveMessage``, ``AckMessage``, ``ChangeInvisibleDuration`` and
``ForwardMessageToDeadLetterQueue`` (:mod:`adapter.proxy.receives`). The pull model's RPCs
(``PullMessage``, ``UpdateOffset``, ``GetOffset``, ``QueryOffset``), which no official client
calls, and lite topics' ``SyncLiteSubscription`` answer ``NOT_IMPLEMENTED`` with the reason.

Known gaps: see the modules of each RPC.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from concurrent.futures import Executor
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from adapter.proxy import codes
from adapter.proxy.auth import Account, Authenticator, Perm
from adapter.proxy.codes import Code, ProxyError
from adapter.proxy.config import Address
from adapter.proxy.messages import resource_name
from adapter.proxy.metrics import ProxyMetrics
from adapter.proxy.protocol import service
from adapter.proxy.receives import Received, Receives
from adapter.proxy.routes import Routes
from adapter.proxy.sends import Sends
from adapter.proxy.telemetry import Telemetry
from adapter.proxy.transactions import Transactions

__all__ = ["Malformed", "MessagingService", "rpc_handler"]

_PULL = (
    "the pull model (queue offsets) is not served: consumers receive with ReceiveMessage, and "
    "`rmq-adapter groups lag|reset` show and move a group's Kafka offsets"
)
_UNSERVED = {
    "PullMessage": _PULL,
    "UpdateOffset": _PULL,
    "GetOffset": _PULL,
    "QueryOffset": _PULL,
    "SyncLiteSubscription": "lite topics are not served by this proxy",
}

log = logging.getLogger(__name__)

Work = Callable[[Mapping[str, str], Account], Awaitable[Any]]
CLIENT_ID = "x-mq-client-id"


class Malformed:
    """A request whose bytes do not parse as its message: answered ``BAD_REQUEST``."""

    def __init__(self, why: str) -> None:
        self.why = why

    def WhichOneof(self, _: str) -> None:  # noqa: N802 - read like a TelemetryCommand
        return None

    def HasField(self, _: str) -> bool:  # noqa: N802
        return False


def _tolerant(kind: Any) -> Callable[[bytes], Any]:
    def parse(data: bytes) -> Any:
        try:
            return kind.FromString(data)
        except DecodeError as exc:
            return Malformed(str(exc))

    return parse


_HANDLERS = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}


def rpc_handler(servicer: MessagingService) -> Any:
    """The gRPC handler of every RPC of ``service.proto``, by ``servicer``'s methods of the same
    name; a request that does not parse reaches them as :class:`Malformed` (gRPC's own
    handlers would answer ``UNKNOWN`` and log a traceback per request)."""
    descriptor = service.DESCRIPTOR.services_by_name["MessagingService"]
    handlers = {}
    for method in descriptor.methods:
        request = getattr(service, method.input_type.name)
        response = getattr(service, method.output_type.name)
        make = _HANDLERS[(method.client_streaming, method.server_streaming)]
        handlers[method.name] = make(
            getattr(servicer, method.name),
            request_deserializer=_tolerant(request),
            response_serializer=response.SerializeToString,
        )
    return grpc.method_handlers_generic_handler(descriptor.full_name, handlers)


def _metadata(context: Any) -> dict[str, str]:
    found: dict[str, str] = {}
    for key, value in context.invocation_metadata() or ():
        if isinstance(value, str):
            found[key.lower()] = value
    return found


class MessagingService:
    """The servicer ``add_MessagingServiceServicer_to_server`` takes (by method name)."""

    def __init__(
        self,
        *,
        auth: Authenticator,
        metrics: ProxyMetrics,
        routes: Routes,
        sends: Sends,
        transactions: Transactions,
        telemetry: Telemetry,
        receives: Receives,
        executor: Executor,
        polls: Executor,
        bound: Callable[[], Address],
    ) -> None:
        self._auth = auth
        self._metrics = metrics
        self._routes = routes
        self._sends = sends
        self._transactions = transactions
        self._telemetry = telemetry
        self._receives = receives
        self._executor = executor
        self._polls = polls
        self._bound = bound

    async def _answer(self, method: str, request: Any, context: Any, work: Work) -> Any:
        kind = getattr(service, f"{method}Response")
        started = time.monotonic()
        try:
            if isinstance(request, Malformed):
                raise ProxyError(Code.BAD_REQUEST, f"{method}: the request does not parse")
            metadata = _metadata(context)
            account = self._auth.authenticate(metadata)
            response = await work(metadata, account)
        except ProxyError as exc:
            response = kind(status=codes.status(exc.code, exc.message))
        except Exception as exc:
            log.exception("%s failed", method)
            response = kind(status=codes.status(Code.INTERNAL_SERVER_ERROR, f"{method}: {exc}"))
        self._metrics.answered(method, response.status.code, time.monotonic() - started)
        return response

    async def _blocking(self, call: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._executor, call, *args)

    # -- served -------------------------------------------------------------------------------

    async def QueryRoute(self, request: Any, context: Any) -> Any:
        async def work(_: Mapping[str, str], account: Account) -> Any:
            return await self._blocking(self._routes.query_route, request, account, self._bound())

        return await self._answer("QueryRoute", request, context, work)

    async def Heartbeat(self, request: Any, context: Any) -> Any:
        async def work(_: Mapping[str, str], __: Account) -> Any:
            return self._routes.heartbeat(request)

        return await self._answer("Heartbeat", request, context, work)

    async def SendMessage(self, request: Any, context: Any) -> Any:
        async def work(metadata: Mapping[str, str], account: Account) -> Any:
            return await self._sends.send(request, account, metadata.get(CLIENT_ID, ""))

        return await self._answer("SendMessage", request, context, work)

    async def EndTransaction(self, request: Any, context: Any) -> Any:
        async def work(_: Mapping[str, str], account: Account) -> Any:
            account.require(Perm.PUB, topic=resource_name(request.topic))
            if not self._transactions.end_at_once(request):  # most commits: no thread
                await self._blocking(self._transactions.end, request)
            return service.EndTransactionResponse(status=codes.status())

        return await self._answer("EndTransaction", request, context, work)

    async def RecallMessage(self, request: Any, context: Any) -> Any:
        async def work(_: Mapping[str, str], account: Account) -> Any:
            return await self._sends.recall(request, account)

        return await self._answer("RecallMessage", request, context, work)

    async def NotifyClientTermination(self, request: Any, context: Any) -> Any:
        async def work(metadata: Mapping[str, str], _: Account) -> Any:
            return self._routes.terminate(metadata.get(CLIENT_ID, ""))

        return await self._answer("NotifyClientTermination", request, context, work)

    async def Telemetry(self, requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        metadata = _metadata(context)
        try:
            self._auth.authenticate(metadata)
        except ProxyError as exc:
            self._metrics.answered("Telemetry", exc.code, 0.0)
            yield service.TelemetryCommand(status=codes.status(exc.code, exc.message))
            return
        self._metrics.answered("Telemetry", Code.OK, 0.0)
        async for command in self._telemetry.stream(requests, metadata.get(CLIENT_ID, "")):
            yield command

    # -- the consumers' RPCs ------------------------------------------------------------------

    async def _not_yet(self, method: str, request: Any, context: Any) -> Any:
        why = _UNSERVED.get(method, "it is not served by this proxy")

        async def work(_: Mapping[str, str], __: Account) -> Any:
            raise ProxyError(Code.NOT_IMPLEMENTED, f"{method}: {why}")

        return await self._answer(method, request, context, work)

    async def QueryAssignment(self, request: Any, context: Any) -> Any:
        async def work(_: Mapping[str, str], account: Account) -> Any:
            return await self._blocking(
                self._routes.query_assignment, request, account, self._bound()
            )

        return await self._answer("QueryAssignment", request, context, work)

    async def AckMessage(self, request: Any, context: Any) -> Any:
        async def work(metadata: Mapping[str, str], account: Account) -> Any:
            return await self._blocking(self._receives.ack, request, account, metadata)

        return await self._answer("AckMessage", request, context, work)

    async def ChangeInvisibleDuration(self, request: Any, context: Any) -> Any:
        async def work(metadata: Mapping[str, str], account: Account) -> Any:
            return await self._blocking(self._receives.change, request, account, metadata)

        return await self._answer("ChangeInvisibleDuration", request, context, work)

    async def ForwardMessageToDeadLetterQueue(self, request: Any, context: Any) -> Any:
        async def work(metadata: Mapping[str, str], account: Account) -> Any:
            return await self._blocking(self._receives.forward, request, account, metadata)

        return await self._answer("ForwardMessageToDeadLetterQueue", request, context, work)

    async def UpdateOffset(self, request: Any, context: Any) -> Any:
        return await self._not_yet("UpdateOffset", request, context)

    async def GetOffset(self, request: Any, context: Any) -> Any:
        return await self._not_yet("GetOffset", request, context)

    async def QueryOffset(self, request: Any, context: Any) -> Any:
        return await self._not_yet("QueryOffset", request, context)

    async def SyncLiteSubscription(self, request: Any, context: Any) -> Any:
        return await self._not_yet("SyncLiteSubscription", request, context)

    async def ReceiveMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:
        """A long poll on the proxy's poll threads (apart from the sends' threads), then the
        stream: the status, the messages, the delivery timestamp."""
        answers: list[Any] = []
        budget = context.time_remaining()

        async def work(_: Mapping[str, str], account: Account) -> Any:
            polled = self._polls.submit(self._receives.receive, request, account, budget)
            try:
                received: Received = await asyncio.shield(asyncio.wrap_future(polled))
            except asyncio.CancelledError:  # the client stopped waiting: give them back
                polled.add_done_callback(lambda done: self._give_back(done))
                raise
            got = self._receives.answers(received)
            answers.extend(got[1:])
            return got[0]

        yield await self._answer("ReceiveMessage", request, context, work)
        for answer in answers:
            yield answer

    def _give_back(self, done: Any) -> None:
        if not done.cancelled() and done.exception() is None:
            self._polls.submit(self._receives.release, done.result())

    async def PullMessage(self, request: Any, context: Any) -> AsyncIterator[Any]:
        yield await self._not_yet("PullMessage", request, context)
