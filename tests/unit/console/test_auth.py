"""Who may use the console: the token, the users file's scrypt hashes, and CSRF tokens."""

from __future__ import annotations

import base64

import pytest

from adapter.console.auth import (
    COOKIE,
    LOCAL,
    Guard,
    Users,
    UsersFileError,
    basic_credentials,
    hash_password,
)

pytestmark = pytest.mark.timeout(10)

SALT = bytes(16)


def basic(name: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{name}:{password}".encode()).decode()


def users(**passwords: str) -> Users:
    return Users.parse("\n".join(f"{n}:{hash_password(p, SALT)}" for n, p in passwords.items()))


def test_a_console_without_auth_takes_everyone_as_the_local_operator() -> None:
    assert Guard(None, None).principal(None, None) == LOCAL


def test_a_token_is_taken_as_a_bearer_header_or_as_the_session_cookie_it_buys() -> None:
    guard = Guard("s3cret", None)
    assert guard.principal("Bearer s3cret", None) is not None
    assert guard.principal(None, f"{COOKIE}={guard.session()}") is not None
    assert "s3cret" not in guard.session()


@pytest.mark.parametrize(
    ("authorization", "cookies"),
    [(None, None), ("Bearer wrong", None), ("Bearer ", None), (None, f"{COOKIE}=s3cret"),
     (None, "garbage;;=="), ("Basic czNjcmV0", None)],
)  # fmt: skip
def test_a_wrong_or_missing_token_is_nobody(authorization: str | None, cookies: str | None) -> None:
    assert Guard("s3cret", None).principal(authorization, cookies) is None


def test_a_session_cookie_does_not_outlive_a_restart() -> None:
    before = Guard("s3cret", None).session()
    assert Guard("s3cret", None).principal(None, f"{COOKIE}={before}") is None


def test_users_sign_in_with_http_basic_against_their_scrypt_hash() -> None:
    guard = Guard(None, users(alice="wonder", bob="builder"))
    assert guard.principal(basic("alice", "wonder"), None) == "user:alice"
    assert guard.principal(basic("alice", "builder"), None) is None
    assert guard.principal(basic("carol", "wonder"), None) is None
    assert guard.principal("Basic !!!", None) is None


def test_a_users_file_stores_no_password_in_clear() -> None:
    line = f"alice:{hash_password('wonder')}"
    assert "wonder" not in line
    assert Users.parse(line).verify("alice", "wonder")


@pytest.mark.parametrize(
    "text",
    ["", "# only a comment", "alice:wonder", "alice:scrypt$zz$00", ":scrypt$00$00",
     "alice:md5$00$00"],
)  # fmt: skip
def test_a_malformed_users_file_is_one_clear_error(text: str) -> None:
    with pytest.raises(UsersFileError):
        Users.parse(text)


def test_basic_credentials_need_a_colon() -> None:
    assert basic_credentials(basic("a", "b:c")) == ("a", "b:c")
    nameless = "Basic " + base64.b64encode(b"alice").decode()
    assert basic_credentials(nameless) is None


def test_a_csrf_token_belongs_to_one_principal_and_one_console() -> None:
    guard = Guard("s3cret", None, secret=b"k" * 32)
    token = guard.csrf_token("bearer")
    assert guard.csrf_ok("bearer", token)
    assert not guard.csrf_ok("user:alice", token)
    assert not guard.csrf_ok("bearer", None)
    assert not guard.csrf_ok("bearer", "")
    assert not Guard("s3cret", None, secret=b"j" * 32).csrf_ok("bearer", token)
