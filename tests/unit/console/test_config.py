"""The console's listen address, and its refusal to leave loopback without auth."""

from __future__ import annotations

import pytest

from adapter.config import KafkaSettings
from adapter.console.auth import Users, hash_password
from adapter.console.config import ConsoleConfig, ConsoleConfigError, is_loopback, parse_listen
from tests.support import unique

pytestmark = pytest.mark.timeout(10)

KAFKA = KafkaSettings("127.0.0.1:9092")


@pytest.mark.parametrize(
    ("text", "address"),
    [("127.0.0.1:8088", ("127.0.0.1", 8088)), ("[::1]:0", ("::1", 0)),
     ("0.0.0.0:80", ("0.0.0.0", 80)), ("localhost:9", ("localhost", 9))],  # noqa: S104
)  # fmt: skip
def test_a_listen_address_is_host_and_port(text: str, address: tuple[str, int]) -> None:
    assert parse_listen(text) == address


@pytest.mark.parametrize("text", ["8088", "host:", ":8088", "host:http", "host:70000"])
def test_a_malformed_listen_address_is_a_clear_error(text: str) -> None:
    with pytest.raises(ConsoleConfigError, match="HOST:PORT"):
        parse_listen(text)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_addresses_are_this_machine(host: str) -> None:
    assert is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "console.example"])  # noqa: S104
def test_any_other_bind_needs_a_token_or_users(host: str) -> None:
    with pytest.raises(ConsoleConfigError, match="--token T or --users FILE"):
        ConsoleConfig(KAFKA, host, 8088)
    token = unique("token")
    assert ConsoleConfig(KAFKA, host, 8088, token=token).token == token
    users = Users.parse(f"alice:{hash_password('pw', bytes(16))}")
    assert ConsoleConfig(KAFKA, host, 8088, users=users).users is users


def test_loopback_needs_no_auth() -> None:
    assert ConsoleConfig(KAFKA, "127.0.0.1", 8088).token is None


def test_a_proxy_that_is_not_host_and_port_is_refused_at_start() -> None:
    with pytest.raises(ConsoleConfigError, match="--proxy 'proxy-1' is not HOST:PORT"):
        ConsoleConfig(KAFKA, "127.0.0.1", 8088, proxies=("127.0.0.1:9090", "proxy-1"))
