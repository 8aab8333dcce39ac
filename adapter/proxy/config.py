"""``ProxyConfig``: the frozen settings of one ``rmq-adapter proxy`` process.

Reproduces the knobs of RocketMQ's proxy that matter on Kafka (``grpcServerPort`` 8081, the
4 MiB body limit, the producer's 3 s send timeout) and adds what Kafka needs: the bootstrap
servers and the ``RMQ_ADAPTER_KAFKA_*`` settings every Kafka client of the proxy takes
(:class:`~adapter.config.KafkaSettings`). The command line builds it from its options, each of
which also reads an ``RMQ_ADAPTER_*`` variable.

Topics on Kafka carry no RocketMQ message type. ``topic_types`` declares the types a topic
accepts (RocketMQ's ``message.type`` topic attribute, ``TOPIC=TYPE[+TYPE...]`` pairs); a topic
not declared accepts every type, as ``adapter.v5`` does. A producer listing a topic declared
``TRANSACTION`` starts that topic's transactional producer (and so receives its check-backs) as
soon as it connects; other topics start theirs at their first transactional message.

Known gaps: namespaces are not supported (a request naming one is refused).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from adapter.config import DEFAULT_MAX_MESSAGE_SIZE, DEFAULT_SEND_TIMEOUT_MS, KafkaSettings
from adapter.exceptions import ConfigError

__all__ = [
    "ALL_TYPES",
    "DEFAULT_LISTEN",
    "DEFAULT_PEER_LISTEN",
    "DEFAULT_PEER_NETWORKS",
    "Address",
    "ProxyConfig",
    "parse_address",
    "parse_networks",
    "parse_topic_types",
]

DEFAULT_LISTEN = "0.0.0.0:8081"  # noqa: S104 - a server's default, as RocketMQ's proxy
DEFAULT_PEER_LISTEN = "127.0.0.1:0"
DEFAULT_PEER_NETWORKS = "127.0.0.0/8,::1/128"
ALL_TYPES = frozenset({"NORMAL", "FIFO", "DELAY", "TRANSACTION", "PRIORITY", "LITE"})
"""The message types of RocketMQ 5 a topic can accept here."""


@dataclass(frozen=True, slots=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_address(text: str) -> Address:
    """``host:port`` (``[v6]:port`` for IPv6) as an :class:`Address`; ``ConfigError`` if not."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"expected host:port, got {text!r}")
    host = host.strip("[]")
    if ":" in host:
        ipaddress.IPv6Address(host)
    return Address(host, int(port))


def parse_networks(text: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """``"10.0.0.0/8,127.0.0.1/32"`` as networks; ``ConfigError`` naming a bad one."""
    networks = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        try:
            networks.append(ipaddress.ip_network(item, strict=False))
        except ValueError as exc:
            raise ConfigError(f"expected a network such as 10.0.0.0/8, got {item!r}") from exc
    return tuple(networks)


def _wildcard(host: str) -> bool:
    return host in ("0.0.0.0", "::", "")  # noqa: S104 - what a wildcard bind looks like


def parse_topic_types(text: str) -> dict[str, frozenset[str]]:
    """``"orders=FIFO,payments=TRANSACTION+NORMAL"`` as topic -> accepted types."""
    types: dict[str, frozenset[str]] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        topic, sep, names = item.partition("=")
        accepted = frozenset(n.strip().upper() for n in names.split("+") if n.strip())
        if not sep or not topic.strip() or not accepted:
            raise ConfigError(f"expected TOPIC=TYPE[+TYPE...], got {item!r}")
        unknown = accepted - ALL_TYPES
        if unknown:
            raise ConfigError(
                f"unknown message type {', '.join(sorted(unknown))} for topic {topic.strip()!r}; "
                f"one of {', '.join(sorted(ALL_TYPES))}"
            )
        types[topic.strip()] = accepted
    return types


@dataclass(frozen=True, slots=True)
class ProxyConfig:
    kafka: KafkaSettings
    listen: Address = field(default_factory=lambda: parse_address(DEFAULT_LISTEN))
    instance_id: str = field(default_factory=lambda: f"{os.getpid()}")
    """Names this process's Kafka clients (and its transactional producers' instance)."""
    users_file: Path | None = None
    """The access keys, secrets and permissions (:mod:`adapter.proxy.auth`); none: auth off."""
    tls_cert: Path | None = None
    tls_key: Path | None = None
    """PEM certificate chain and key; neither: a self-signed certificate made at start."""
    plaintext: bool = False
    """gRPC itself listens, plaintext only: no TLS, and no front copying each connection's bytes
    (:mod:`adapter.proxy.front`), which costs time on every call. For clients built with TLS
    off (``enableSsl(false)``, the Python client's default), or TLS ended before the proxy."""
    reuse_port: bool = False
    """Bind with ``SO_REUSEPORT``: several proxies share one port, the kernel spreads clients."""
    stop_timeout_s: float = 30.0
    send_timeout_ms: int = DEFAULT_SEND_TIMEOUT_MS
    max_body_size: int = DEFAULT_MAX_MESSAGE_SIZE
    max_inflight: int = 2000
    """Messages being sent at once; past it a send is answered ``TOO_MANY_REQUESTS``."""
    topic_types: Mapping[str, frozenset[str]] = field(default_factory=dict)
    transactional_idle_s: float = 300.0
    """A topic's transactional producer with no client left for this long is closed (its
    check-backs go to a proxy that has one)."""
    fifo_groups: frozenset[str] = frozenset()
    """Consumer groups that keep each message group's order (RocketMQ's ``consumeMessageOrderly``
    group attribute), with their namespace if any: ``shopA%GID_orders``."""
    peer_listen: Address = field(default_factory=lambda: parse_address(DEFAULT_PEER_LISTEN))
    """Where the other proxies settle the messages this one handed out (plaintext gRPC)."""
    peer_advertise: Address | None = None
    """The peer address named in receipt handles; default: where ``peer_listen`` bound."""
    peer_networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = field(
        default_factory=lambda: parse_networks(DEFAULT_PEER_NETWORKS)
    )
    """The only networks a receipt handle's proxy may be in (:mod:`adapter.proxy.peers`)."""

    def __post_init__(self) -> None:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ConfigError("give both --tls-cert and --tls-key, or neither")
        if self.plaintext and self.tls_cert is not None:
            raise ConfigError("--plaintext serves no TLS: give it or --tls-cert, not both")
        if self.stop_timeout_s <= 0:
            raise ConfigError(f"stop timeout must be positive, got {self.stop_timeout_s}")
        if self.send_timeout_ms <= 0:
            raise ConfigError(f"send timeout must be positive, got {self.send_timeout_ms} ms")
        if self.max_body_size <= 0:
            raise ConfigError(f"max body size must be positive, got {self.max_body_size}")
        if self.max_inflight <= 0:
            raise ConfigError(f"max in-flight sends must be positive, got {self.max_inflight}")
        if self.peer_advertise is None and _wildcard(self.peer_listen.host):
            raise ConfigError(
                f"--peer-listen {self.peer_listen} binds every address: give --peer-advertise, "
                "the address the other proxies reach this one by"
            )

    def accepted_types(self, topic: str) -> frozenset[str]:
        """The message types ``topic`` accepts (every type unless declared)."""
        return self.topic_types.get(topic, ALL_TYPES)
