"""Who may use the console, and CSRF tokens for its actions.

Not a RocketMQ behaviour: rocketmq-dashboard's login is a users file of plain passwords. Here a
console is either open to this machine only (no auth: the listen address is loopback, see
:mod:`adapter.console.config`), or guarded by a token (``--token``: the browser sends it once
to ``/login`` and keeps it in an HttpOnly, SameSite=Strict cookie; scripts send
``Authorization: Bearer T``) or by a users file (``--users``: HTTP Basic, passwords stored as
scrypt hashes, one ``name:scrypt$salt$hash`` line each; :func:`hash_password` makes the line's
hash). A request without the credential gets 403.

Every action is a POST carrying a CSRF token: an HMAC, under a secret made at start, of the
principal. A page another site serves cannot read it, so it cannot make the browser post an
action; a POST without it, or with another principal's, gets 403.

Known gaps: no logout for HTTP Basic (browsers keep the credential until closed); the CSRF
secret changes when the console restarts, so a form loaded before a restart is refused once.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie
from pathlib import Path

from adapter.exceptions import AdapterError

COOKIE = "rmq_console_token"
LOCAL = "local"
"""The principal of a console without auth (reachable from this machine only)."""
BEARER = "bearer"
"""The principal of a request that carried the token."""
_SCRYPT = {"n": 2**14, "r": 8, "p": 1}


class UsersFileError(AdapterError):
    """A users file that cannot be read or has a malformed line."""


def hash_password(password: str, salt: bytes | None = None) -> str:
    """The ``scrypt$salt$hash`` (hex) a users file stores for ``password``."""
    salt = secrets.token_bytes(16) if salt is None else salt
    digest = hashlib.scrypt(password.encode(), salt=salt, **_SCRYPT)
    return f"scrypt${salt.hex()}${digest.hex()}"


def _matches(password: str, stored: str) -> bool:
    _, salt, digest = stored.split("$")
    again = hashlib.scrypt(password.encode(), salt=bytes.fromhex(salt), **_SCRYPT)
    return hmac.compare_digest(again.hex(), digest)


@dataclass(frozen=True, slots=True)
class Users:
    """The users file: each name and its password's hash."""

    hashes: dict[str, str]

    @classmethod
    def parse(cls, text: str, source: str = "the users file") -> Users:
        hashes: dict[str, str] = {}
        for number, raw in enumerate(text.splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            name, _, stored = line.partition(":")
            parts = stored.split("$")
            valid = len(parts) == 3 and parts[0] == "scrypt"
            try:
                valid = valid and bool(bytes.fromhex(parts[1])) and bool(bytes.fromhex(parts[2]))
            except ValueError:
                valid = False
            if not name or not valid:
                raise UsersFileError(
                    f"{source} line {number}: not NAME:scrypt$SALT$HASH "
                    "(make the hash with adapter.console.auth.hash_password)"
                )
            hashes[name] = stored
        if not hashes:
            raise UsersFileError(f"{source} names no user")
        return cls(hashes)

    @classmethod
    def load(cls, path: Path) -> Users:
        try:
            text = path.read_text()
        except OSError as exc:
            raise UsersFileError(f"cannot read users file {path}: {exc.strerror}") from exc
        return cls.parse(text, str(path))

    def verify(self, name: str, password: str) -> bool:
        stored = self.hashes.get(name)
        return stored is not None and _matches(password, stored)


def basic_credentials(header: str | None) -> tuple[str, str] | None:
    """The name and password of an ``Authorization: Basic ...`` header, if it is one."""
    if not header or not header.startswith("Basic "):
        return None
    try:
        decoded = base64.b64decode(header[6:].strip(), validate=True).decode()
    except (ValueError, UnicodeDecodeError):
        return None
    name, sep, password = decoded.partition(":")
    return (name, password) if sep else None


def cookie(header: str | None, name: str) -> str | None:
    if not header:
        return None
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except CookieError:
        return None
    morsel = jar.get(name)
    return None if morsel is None else morsel.value


class Guard:
    """Decides who a request is (``None``: nobody allowed) and checks CSRF tokens."""

    def __init__(self, token: str | None, users: Users | None, secret: bytes | None = None):
        self.token = token or None
        self.users = users
        self._secret = secrets.token_bytes(32) if secret is None else secret

    @property
    def open(self) -> bool:
        """No auth set: every request from this machine is the local operator."""
        return self.token is None and self.users is None

    def principal(self, authorization: str | None, cookies: str | None) -> str | None:
        if self.open:
            return LOCAL
        if self.token is not None:
            bearer = (
                authorization[7:].strip()
                if authorization and authorization.startswith("Bearer ")
                else None
            )
            if bearer and self.token_matches(bearer):
                return BEARER
            kept = cookie(cookies, COOKIE)
            if kept and hmac.compare_digest(kept.encode(), self.session().encode()):
                return BEARER
        if self.users is not None:
            credentials = basic_credentials(authorization)
            if credentials and self.users.verify(*credentials):
                return f"user:{credentials[0]}"
        return None

    def token_matches(self, given: str) -> bool:
        return self.token is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def session(self) -> str:
        """The cookie a browser keeps once signed in with the token: not the token itself,
        and void once the console restarts."""
        return hmac.new(
            self._secret, b"session:" + (self.token or "").encode(), "sha256"
        ).hexdigest()

    def csrf_token(self, principal: str) -> str:
        return hmac.new(self._secret, principal.encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, principal: str, given: str | None) -> bool:
        return bool(given) and hmac.compare_digest(
            self.csrf_token(principal).encode(), (given or "").encode()
        )
