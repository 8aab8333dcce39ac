"""The proxy's TLS certificate: the one given, or a self-signed one made at start.

RocketMQ's proxy serves TLS with a configured certificate, or a self-signed one
(``tlsTestModeEnable``); the Java client trusts any certificate by default, so a self-signed
one serves it without any change to the application. ``--tls-cert`` and ``--tls-key`` give PEM
files (a chain and its key); without them the proxy makes an EC P-256 key and a certificate for
``localhost`` and the host's name, valid for a year, kept in memory only.

Known gaps: no client certificates (mutual TLS); a certificate file replaced on disk is read
again only at the next start.
"""

from __future__ import annotations

import datetime
import ipaddress
import socket
from typing import Any

import grpc

from adapter.exceptions import ConfigError
from adapter.proxy.config import ProxyConfig

__all__ = ["self_signed", "server_credentials"]


def self_signed(names: list[str]) -> tuple[bytes, bytes]:
    """A new key and a certificate for ``names``: (certificate PEM, key PEM)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    now = datetime.datetime.now(datetime.UTC)
    alternatives: list[x509.GeneralName] = [x509.DNSName(name) for name in names]
    alternatives.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName(alternatives), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return certificate.public_bytes(serialization.Encoding.PEM), key_pem


def server_credentials(config: ProxyConfig) -> Any:
    """gRPC server credentials from the configured files, or a self-signed certificate."""
    if config.tls_cert is not None and config.tls_key is not None:
        try:
            chain, key = config.tls_cert.read_bytes(), config.tls_key.read_bytes()
        except OSError as exc:
            raise ConfigError(f"TLS certificate or key: {exc}") from exc
    else:
        chain, key = self_signed(["localhost", socket.gethostname()])
    return grpc.ssl_server_credentials([(key, chain)])
