"""The self-signed certificate the proxy makes when none is given."""

from __future__ import annotations

import datetime

import pytest
from cryptography import x509

from adapter.proxy.tls import self_signed

pytestmark = pytest.mark.timeout(30)


def test_a_self_signed_certificate_names_the_host_and_lasts_a_year() -> None:
    pem, key = self_signed(["localhost", "proxy-host"])
    certificate = x509.load_pem_x509_certificate(pem)
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["localhost", "proxy-host"]
    lasts = certificate.not_valid_after_utc - certificate.not_valid_before_utc
    assert lasts > datetime.timedelta(days=364)
    assert certificate.issuer == certificate.subject
    assert b"PRIVATE KEY" in key
