"""The console's settings, and the rule that a console reachable beyond this machine needs auth.

Not a RocketMQ behaviour: rocketmq-dashboard listens on every address with login off by default.
Here the console binds 127.0.0.1 unless told otherwise, and any other address (``0.0.0.0``, a
LAN address) is refused at start unless a token or a users file is set: its pages can resend
dead letters, resume transactions and move consumer offsets.

Known gaps: no TLS of its own; put it behind a TLS proxy when it leaves the machine.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from adapter.config import KafkaSettings
from adapter.console.auth import Users
from adapter.delay import DelayLevels
from adapter.exceptions import AdapterError

DEFAULT_LISTEN = "127.0.0.1:8088"


class ConsoleConfigError(AdapterError):
    """A listen address that does not parse, or a public bind without auth."""


@dataclass(frozen=True, slots=True)
class ConsoleConfig:
    kafka: KafkaSettings
    host: str
    port: int
    token: str | None = None
    users: Users | None = None
    timeout_s: float = 10.0
    levels: DelayLevels = field(default_factory=DelayLevels.parse)
    proxies: tuple[str, ...] = ()
    """The proxies' metrics endpoints (``HOST:PORT``) the overview shows."""
    index: Path | None = None
    """The message index (``rmq-adapter spark index``) the message page answers from."""

    def __post_init__(self) -> None:
        require_auth_beyond_loopback(self.host, self.token, self.users)
        for proxy in self.proxies:
            parse_address(proxy, "--proxy", "127.0.0.1:9090")


def parse_listen(text: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:8088`` for IPv6) as a host and a port (0: any free port)."""
    return parse_address(text, "--listen", DEFAULT_LISTEN)


def parse_address(text: str, option: str, example: str) -> tuple[str, int]:
    host, sep, port = text.strip().rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ConsoleConfigError(f"{option} {text!r} is not HOST:PORT (e.g. {example})")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: it may resolve anywhere


def require_auth_beyond_loopback(host: str, token: str | None, users: Users | None) -> None:
    if not is_loopback(host) and not token and users is None:
        raise ConsoleConfigError(
            f"the console would listen on {host}, beyond this machine, without auth: give "
            "--token T or --users FILE (or listen on 127.0.0.1)"
        )
