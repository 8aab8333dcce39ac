"""Receipt handles that name their proxy, and which proxies a call may be passed on to."""

from __future__ import annotations

import pytest

from adapter.config import KafkaSettings
from adapter.exceptions import ConfigError
from adapter.proxy.codes import Code, ProxyError
from adapter.proxy.config import Address, ProxyConfig, parse_address, parse_networks
from adapter.proxy.peers import FORWARDED, Peers, join, split

pytestmark = pytest.mark.timeout(10)

ME = Address("127.0.0.1", 7001)
LOOPBACK = parse_networks("127.0.0.0/8,::1/128")


def test_a_handle_names_the_proxy_that_holds_its_message_and_splits_back() -> None:
    handle = join("Orders:0:17#2", ME)
    assert handle == "Orders:0:17#2@127.0.0.1:7001"
    assert split(handle) == ("Orders:0:17#2", ME)
    assert split(join("x", Address("::1", 9))) == ("x", Address("::1", 9))


@pytest.mark.parametrize("handle", ["Orders:0:17#2", "a@not-an-address", "a@host:99999", ""])
def test_a_handle_naming_no_proxy_or_a_garbled_one_stays_as_it_is(handle: str) -> None:
    assert split(handle) == (handle, None)


def test_only_another_proxy_is_other() -> None:
    peers = Peers(ME, LOOPBACK)
    assert peers.other(None) is None
    assert peers.other(ME) is None
    assert peers.other(Address("127.0.0.1", 7002)) == Address("127.0.0.1", 7002)


def test_a_call_is_never_passed_on_outside_the_peer_networks_or_twice() -> None:
    peers = Peers(ME, LOOPBACK)
    for peer in (Address("10.1.2.3", 7002), Address("example.org", 7002)):
        with pytest.raises(ProxyError, match="not a proxy network") as refused:
            peers.pass_on("AckMessage", object(), peer, {})
        assert refused.value.code == Code.INVALID_RECEIPT_HANDLE
    with pytest.raises(ProxyError, match="not this one"):
        peers.pass_on("AckMessage", object(), Address("127.0.0.1", 7002), {FORWARDED: "x"})


def test_a_wildcard_peer_address_needs_an_advertised_one() -> None:
    kafka = KafkaSettings("127.0.0.1:9092")
    with pytest.raises(ConfigError, match="--peer-advertise"):
        ProxyConfig(kafka, peer_listen=parse_address("0.0.0.0:7001"))
    ProxyConfig(
        kafka,
        peer_listen=parse_address("0.0.0.0:7001"),
        peer_advertise=parse_address("10.0.0.5:7001"),
    )
    with pytest.raises(ConfigError, match="a network such as"):
        parse_networks("10.0.0.0/8,nonsense")
