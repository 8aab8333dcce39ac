"""The proxy's settings: addresses, declared topic types, and what is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapter.config import KafkaSettings
from adapter.exceptions import ConfigError
from adapter.proxy.config import (
    ALL_TYPES,
    Address,
    ProxyConfig,
    parse_address,
    parse_topic_types,
)

pytestmark = pytest.mark.timeout(10)


def test_the_default_listen_address_is_the_rocketmq_proxy_s_port() -> None:
    config = ProxyConfig(KafkaSettings("k:9092"))
    assert config.listen == Address("0.0.0.0", 8081)  # noqa: S104


@pytest.mark.parametrize(
    ("text", "address"),
    [("127.0.0.1:0", Address("127.0.0.1", 0)), ("[::1]:8081", Address("::1", 8081))],
)
def test_an_address_is_host_and_port(text: str, address: Address) -> None:
    assert parse_address(text) == address


@pytest.mark.parametrize("text", ["8081", "host:", "host:port", "host:70000", ":8081"])
def test_a_bad_address_is_a_clear_error(text: str) -> None:
    with pytest.raises(ConfigError, match="host:port"):
        parse_address(text)


def test_topic_types_name_what_each_declared_topic_accepts() -> None:
    types = parse_topic_types("orders=FIFO, pay=transaction+normal,")
    config = ProxyConfig(KafkaSettings("k:9092"), topic_types=types)
    assert config.accepted_types("orders") == {"FIFO"}
    assert config.accepted_types("pay") == {"TRANSACTION", "NORMAL"}
    assert config.accepted_types("other") == ALL_TYPES


@pytest.mark.parametrize(
    ("text", "why"), [("orders", "TOPIC=TYPE"), ("orders=", "TOPIC=TYPE"), ("o=BULK", "BULK")]
)
def test_bad_topic_types_are_refused_with_the_reason(text: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        parse_topic_types(text)


def test_a_certificate_needs_its_key() -> None:
    with pytest.raises(ConfigError, match="both"):
        ProxyConfig(KafkaSettings("k:9092"), tls_cert=Path("cert.pem"))


def test_a_plaintext_proxy_takes_no_certificate() -> None:
    with pytest.raises(ConfigError, match="--plaintext serves no TLS"):
        ProxyConfig(
            KafkaSettings("k:9092"),
            plaintext=True,
            tls_cert=Path("cert.pem"),
            tls_key=Path("key.pem"),
        )
