"""Settling a message another proxy handed out: receipt handles that name their proxy.

RocketMQ's proxies are stateless: a receipt handle names the broker that holds the message, and
any proxy settles it there. On Kafka a share group settles a record only through the consumer
that acquired it, which lives in one proxy. So each proxy also serves its peers on a private
plaintext gRPC port (``--peer-listen``, default ``127.0.0.1:0``; ``--peer-advertise`` when that
binds a wildcard), and every receipt handle it hands out ends with ``@<that address>``. A proxy
given a handle of another one (a client behind a per-call balancer, a channel moved to another
proxy) passes the ``AckMessage``, ``ChangeInvisibleDuration`` or
``ForwardMessageToDeadLetterQueue`` on to it, with the client's own metadata (its signature
included), marked as passed on; the peer settles it itself or refuses it, never passes it on
again. A message is settled only by the proxy whose consumer holds it: never twice.

Only addresses inside ``--peer-networks`` (default loopback) are ever called: a forged handle
cannot make a proxy call an arbitrary host.

Known gaps: a proxy that died takes its held messages with it (they come back after Kafka's lock
ends): an ack for one is answered ``INVALID_RECEIPT_HANDLE``, as for any lapsed message.
"""

from __future__ import annotations

import ipaddress
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import grpc

from adapter.exceptions import ConfigError
from adapter.proxy.codes import Code, ProxyError
from adapter.proxy.config import Address, parse_address

__all__ = ["FORWARDED", "Peers", "join", "split"]

log = logging.getLogger(__name__)

FORWARDED = "x-rmq-adapter-forwarded"
"""Metadata of a call one proxy passed on to another."""
SEPARATOR = "@"
PEER_TIMEOUT_S = 10.0
_PASSED_ON = ("authorization", "x-mq-date-time", "x-mq-client-id", "x-mq-namespace")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def join(handle: str, peer: Address) -> str:
    """The handle a client gets: the consumer's handle and the proxy that holds it."""
    return f"{handle}{SEPARATOR}{peer}"


def split(handle: str) -> tuple[str, Address | None]:
    """The consumer's handle and the proxy that holds it (None: no proxy named, or garbled)."""
    inner, sep, where = handle.rpartition(SEPARATOR)
    if not sep:
        return handle, None
    try:
        return inner, parse_address(where)
    except (ConfigError, ValueError):  # a garbled address is no address
        return handle, None


class Peers:
    """This proxy's peer address, and the calls it passes on to the others."""

    def __init__(self, me: Address, networks: Sequence[Network]) -> None:
        self.me = me
        self._networks = tuple(networks)
        self._lock = threading.Lock()
        self._channels: dict[Address, Any] = {}

    def other(self, peer: Address | None) -> Address | None:
        """``peer`` when it is another proxy; None when it is this one (or none is named)."""
        return None if peer is None or peer == self.me else peer

    def pass_on(self, method: str, request: Any, peer: Address, metadata: Mapping[str, str]) -> Any:
        """``request`` answered by ``peer`` (blocking); ``ProxyError`` when it may not or
        cannot be reached, or when the call was passed on to this proxy already."""
        if metadata.get(FORWARDED):
            raise ProxyError(
                Code.INVALID_RECEIPT_HANDLE,
                f"the receipt handle names proxy {peer}, not this one ({self.me})",
            )
        if not self._allowed(peer):
            raise ProxyError(
                Code.INVALID_RECEIPT_HANDLE,
                f"the receipt handle names {peer}, which is not a proxy network (--peer-networks)",
            )
        from adapter.proxy.protocol import service_grpc

        stub = service_grpc.MessagingServiceStub(self._channel(peer))
        passed = [(k, v) for k, v in metadata.items() if k in _PASSED_ON]
        try:
            answer = getattr(stub, method)(
                request, timeout=PEER_TIMEOUT_S, metadata=[*passed, (FORWARDED, str(self.me))]
            )
        except grpc.RpcError as exc:
            raise ProxyError(
                Code.INVALID_RECEIPT_HANDLE,
                f"proxy {peer}, which handed the message out, cannot be reached ({exc.code().name}"
                "): the message comes back after its invisible duration",
            ) from exc
        log.debug("%s passed on to proxy %s: %s", method, peer, answer.status.code)
        return answer

    def _allowed(self, peer: Address) -> bool:
        try:
            address = ipaddress.ip_address(peer.host)
        except ValueError:
            return False
        return any(address in network for network in self._networks)

    def _channel(self, peer: Address) -> Any:
        with self._lock:
            channel = self._channels.get(peer)
            if channel is None:
                channel = grpc.insecure_channel(str(peer))
                self._channels[peer] = channel
            return channel

    def close(self) -> None:
        with self._lock:
            channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            channel.close()
