"""Signed SCHEDULE records: which application wrote a delayed message, proven with a key.

Kafka never tells a consumer which principal wrote a record, and the forwarder delivers with
the workers' broader permissions; by itself it cannot keep one application from having
another's topics written through ``SCHEDULE_TOPIC_XXXX``. So an application given a name and
a secret key (``RMQ_ADAPTER_SCHEDULE_SIGNER``, ``RMQ_ADAPTER_SCHEDULE_KEY``) signs every
SCHEDULE record it writes (a delayed message, a timer, a consumer's send-back): header
``rmq.signer`` names it, header ``rmq.signature`` is HMAC-SHA256(key, name NUL value) in hex.
The value is the whole Avro record: real topic, queue, properties and body. A timer's hops and
a copy set aside for a missing topic carry the same value and the same two headers, so the
signature holds all the way. A forwarder given the grants (:mod:`adapter.schedule.grants`)
holds every application's key and delivers a record only to a topic its signer is granted.

Known gaps: a signature proves the writer, not freshness: a record copied byte for byte is
valid again. Only the workers may read SCHEDULE, and a copy reaches only its signer's topic.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from adapter.exceptions import ConfigError

SIGNER_HEADER = "rmq.signer"
SIGNATURE_HEADER = "rmq.signature"
ENV_SIGNER = "RMQ_ADAPTER_SCHEDULE_SIGNER"
ENV_KEY = "RMQ_ADAPTER_SCHEDULE_KEY"
MIN_KEY_CHARS = 16

SignedHeaders = tuple[tuple[str, bytes], ...]
"""The two headers of a signed record, as they are carried from one copy to the next."""


def signature(name: str, key: bytes, value: bytes) -> bytes:
    """The ``rmq.signature`` of ``value`` signed by application ``name`` with ``key``."""
    return hmac.new(key, name.encode() + b"\0" + value, hashlib.sha256).hexdigest().encode()


def check_key(name: str, key: str, where: str) -> bytes:
    """``key`` as bytes; :class:`ConfigError` for a name or key that cannot sign."""
    if not name or not name.isprintable() or len(name) > 255:
        raise ConfigError(f"{where}: the signer name must be 1-255 printable characters")
    if len(key) < MIN_KEY_CHARS:
        raise ConfigError(
            f"{where}: the signing key of {name!r} must be at least {MIN_KEY_CHARS} characters "
            f"(got {len(key)}); make one with: python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))'"
        )
    return key.encode()


@dataclass(frozen=True, slots=True)
class ScheduleSigner:
    """An application's name and key: what it signs its SCHEDULE records with."""

    name: str
    key: bytes = field(repr=False)

    def headers(self, value: bytes) -> SignedHeaders:
        """The headers that sign ``value``."""
        return (
            (SIGNER_HEADER, self.name.encode()),
            (SIGNATURE_HEADER, signature(self.name, self.key, value)),
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ScheduleSigner | None:
        """The signer of ``RMQ_ADAPTER_SCHEDULE_SIGNER`` and ``RMQ_ADAPTER_SCHEDULE_KEY``; None
        when neither is set (records go unsigned); :class:`ConfigError` when one is missing."""
        env = os.environ if environ is None else environ
        name, key = env.get(ENV_SIGNER, ""), env.get(ENV_KEY, "")
        if not name and not key:
            return None
        if not name or not key:
            missing = ENV_SIGNER if not name else ENV_KEY
            raise ConfigError(f"{missing} is not set: a SCHEDULE signer needs a name and a key")
        return cls(name, check_key(name, key, ENV_KEY))


def signed(value: bytes, signer: ScheduleSigner | None) -> list[tuple[str, bytes]]:
    """The signing headers of ``value`` for ``signer``; none without one."""
    return list(signer.headers(value)) if signer is not None else []
