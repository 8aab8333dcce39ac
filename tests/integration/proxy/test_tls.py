"""TLS and plaintext on one port: a given certificate is served, or a self-signed one made at
start (the Java client, which trusts any, is in ``test_java_client.py``)."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

import grpc
import pytest

from adapter.proxy.protocol import Code, definition, service, service_grpc
from adapter.proxy.tls import self_signed
from tests.integration.proxy.conftest import RunningProxy, StartProxy

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]


def heartbeat(channel: grpc.Channel) -> int:
    stub = service_grpc.MessagingServiceStub(channel)
    request = service.HeartbeatRequest(client_type=definition.ClientType.PRODUCER)
    return int(stub.Heartbeat(request, timeout=10).status.code)


def test_a_given_certificate_is_served_beside_plaintext_on_one_port(
    start_proxy: StartProxy, tmp_path: Path
) -> None:
    certificate, key = self_signed(["localhost"])
    (tmp_path / "cert.pem").write_bytes(certificate)
    (tmp_path / "key.pem").write_bytes(key)
    proxy = start_proxy(
        "--tls-cert", str(tmp_path / "cert.pem"), "--tls-key", str(tmp_path / "key.pem")
    )
    trusted = grpc.ssl_channel_credentials(root_certificates=certificate)
    options = [("grpc.ssl_target_name_override", "localhost")]
    with grpc.secure_channel(proxy.endpoint, trusted, options) as channel:
        assert heartbeat(channel) == Code.OK
    with grpc.insecure_channel(proxy.endpoint) as channel:
        assert heartbeat(channel) == Code.OK


def test_without_a_certificate_a_self_signed_one_speaks_h2(proxy: RunningProxy) -> None:
    host, port = proxy.endpoint.rsplit(":", 1)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # as the Java client does by default
    context.set_alpn_protocols(["h2"])
    with (
        socket.create_connection((host, int(port)), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        assert tls.selected_alpn_protocol() == "h2"
        assert tls.getpeercert(binary_form=True)


def test_a_plaintext_proxy_serves_plaintext_clients_and_no_tls(start_proxy: StartProxy) -> None:
    proxy = start_proxy("--plaintext")
    with grpc.insecure_channel(proxy.endpoint) as channel:
        assert heartbeat(channel) == Code.OK
    host, port = proxy.endpoint.rsplit(":", 1)
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection((host, int(port)), timeout=10) as raw,
        pytest.raises((ssl.SSLError, OSError)),
    ):
        context.wrap_socket(raw, server_hostname="localhost")
    assert "plaintext only" in proxy.output()
