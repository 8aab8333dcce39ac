"""Access keys, signatures and permissions: RocketMQ's ACL in front of the proxy.

Reproduces RocketMQ's ``plain_acl.yml`` ACL (1.0) with 5.x's request signature:

- every request carries ``authorization: MQv2-HMAC-SHA1 Credential=<access key>,
  SignedHeaders=x-mq-date-time, Signature=<hex HMAC-SHA1 of x-mq-date-time under the
  secret>``, which the official clients compute from their ``Credentials``; a missing header,
  an unknown access key or a wrong signature is ``UNAUTHORIZED``;
- the users file (TOML) lists accounts as ``plain_acl.yml`` does: ``accessKey``,
  ``secretKey``, ``topicPerms`` and ``groupPerms`` (``"name=PUB"``, ``SUB``, ``PUB|SUB`` or
  ``DENY``), ``defaultTopicPerm`` and ``defaultGroupPerm`` (``DENY`` unless set), ``admin``
  (everything allowed). Sending needs ``PUB`` on the topic, receiving ``SUB`` on the topic and
  on the group, a route lookup either; a missing permission is ``FORBIDDEN``.

With no users file, auth is off and every request is allowed (the proxy says so at start).
Secrets are held only here and never appear in a log line, an error message or ``repr``.

Known gaps: the signed date is not checked for freshness (RocketMQ does not either), so a
captured header can be replayed: use TLS where the network is not trusted. Session tokens
(``x-mq-session-token``) and RocketMQ 5.3's ACL 2.0 (users and policies in the broker) are not
supported.
"""

from __future__ import annotations

import hashlib
import hmac
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Flag, auto
from pathlib import Path
from typing import Any

from adapter.exceptions import ConfigError
from adapter.proxy.codes import Code, ProxyError

__all__ = ["Account", "Authenticator", "Perm", "parse_authorization", "signature"]

SCHEME = "MQv2-HMAC-SHA1"
DATE_HEADER = "x-mq-date-time"


class Perm(Flag):
    DENY = 0
    PUB = auto()
    SUB = auto()

    @classmethod
    def parse(cls, text: str, where: str) -> Perm:
        perm = cls.DENY
        for part in (p.strip().upper() for p in text.split("|")):
            if part not in ("PUB", "SUB", "DENY"):
                raise ConfigError(f"{where}: permission {text!r} is not PUB, SUB, PUB|SUB or DENY")
            perm |= cls[part]
        return perm


def signature(secret: str, date_time: str) -> str:
    """The signature a client with ``secret`` sends for ``date_time``."""
    return hmac.new(secret.encode(), date_time.encode(), hashlib.sha1).hexdigest()


def parse_authorization(header: str) -> tuple[str, str, str]:
    """``(access key, signed headers, signature)`` of an ``authorization`` header."""
    scheme, _, rest = header.strip().partition(" ")
    if scheme != SCHEME:
        raise ProxyError(Code.UNAUTHORIZED, f"authorization scheme must be {SCHEME}")
    fields: dict[str, str] = {}
    for part in rest.split(","):
        name, sep, value = part.strip().partition("=")
        if sep:
            fields[name.strip()] = value.strip()
    try:
        return fields["Credential"], fields["SignedHeaders"], fields["Signature"]
    except KeyError as missing:
        raise ProxyError(Code.UNAUTHORIZED, f"authorization without {missing.args[0]}") from None


@dataclass(frozen=True, slots=True)
class Account:
    access_key: str
    secret: str = field(repr=False)
    topics: Mapping[str, Perm] = field(default_factory=dict)
    groups: Mapping[str, Perm] = field(default_factory=dict)
    default_topic: Perm = Perm.DENY
    default_group: Perm = Perm.DENY
    admin: bool = False

    def may(self, perm: Perm, *, topic: str | None = None, group: str | None = None) -> bool:
        if self.admin:
            return True
        if topic is not None and not self.topics.get(topic, self.default_topic) & perm:
            return False
        return group is None or bool(self.groups.get(group, self.default_group) & perm)

    def require(self, perm: Perm, *, topic: str | None = None, group: str | None = None) -> None:
        """``FORBIDDEN`` unless this account has ``perm`` on ``topic`` (and ``group``)."""
        if not self.may(perm, topic=topic, group=group):
            what = " and ".join(
                f"{kind} {name!r}" for kind, name in (("topic", topic), ("group", group)) if name
            )
            raise ProxyError(
                Code.FORBIDDEN, f"access key {self.access_key!r} has no {perm.name} on {what}"
            )


ANONYMOUS = Account("", "", admin=True)
"""Who sends when auth is off."""


def _perms(entries: object, where: str) -> dict[str, Perm]:
    if not isinstance(entries, list):
        raise ConfigError(f'{where} must be a list of "name=PERM" strings')
    perms: dict[str, Perm] = {}
    for entry in entries:
        name, sep, text = str(entry).partition("=")
        if not sep or not name.strip():
            raise ConfigError(f'{where}: expected "name=PERM", got {entry!r}')
        perms[name.strip()] = Perm.parse(text, where)
    return perms


def _account(raw: Any, index: int) -> Account:
    where = f"account {index + 1}"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where} is not a table")
    key, secret = raw.get("accessKey"), raw.get("secretKey")
    if not isinstance(key, str) or not key or not isinstance(secret, str) or not secret:
        raise ConfigError(f"{where} needs a non-empty accessKey and secretKey")
    where = f"account {key!r}"
    return Account(
        key,
        secret,
        topics=_perms(raw.get("topicPerms", []), f"{where} topicPerms"),
        groups=_perms(raw.get("groupPerms", []), f"{where} groupPerms"),
        default_topic=Perm.parse(str(raw.get("defaultTopicPerm", "DENY")), where),
        default_group=Perm.parse(str(raw.get("defaultGroupPerm", "DENY")), where),
        admin=bool(raw.get("admin", False)),
    )


class Authenticator:
    """Who sent a request, from its metadata; everyone is :data:`ANONYMOUS` with no users."""

    def __init__(self, accounts: Mapping[str, Account] | None) -> None:
        self._accounts = accounts

    @classmethod
    def load(cls, path: Path | None) -> Authenticator:
        """The accounts of the users file at ``path`` (``ConfigError`` naming what is wrong,
        never a secret); auth off when ``path`` is None."""
        if path is None:
            return cls(None)
        try:
            raw = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"users file {path}: {exc}") from exc
        accounts = raw.get("accounts")
        if not isinstance(accounts, list) or not accounts:
            raise ConfigError(f"users file {path}: no [[accounts]]")
        parsed = [_account(entry, i) for i, entry in enumerate(accounts)]
        by_key = {account.access_key: account for account in parsed}
        if len(by_key) != len(parsed):
            raise ConfigError(f"users file {path}: an accessKey is listed twice")
        return cls(by_key)

    @property
    def enabled(self) -> bool:
        return self._accounts is not None

    @property
    def account_count(self) -> int:
        return len(self._accounts or {})

    def authenticate(self, metadata: Mapping[str, str]) -> Account:
        """The account whose signature ``metadata`` carries; ``UNAUTHORIZED`` otherwise."""
        if self._accounts is None:
            return ANONYMOUS
        header = metadata.get("authorization")
        if not header:
            raise ProxyError(
                Code.UNAUTHORIZED, "no authorization header (give the client its Credentials)"
            )
        key, signed, given = parse_authorization(header)
        account = self._accounts.get(key)
        if account is None:
            raise ProxyError(Code.UNAUTHORIZED, f"unknown access key {key!r}")
        if DATE_HEADER not in (h.strip().lower() for h in signed.split(";")):
            raise ProxyError(Code.UNAUTHORIZED, f"the signature must cover {DATE_HEADER}")
        date_time = metadata.get(DATE_HEADER, "")
        expected = signature(account.secret, date_time)
        if not hmac.compare_digest(expected.lower(), given.strip().lower()):
            raise ProxyError(Code.UNAUTHORIZED, f"wrong signature for access key {key!r}")
        return account
