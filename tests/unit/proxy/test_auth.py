"""Access keys and signatures as RocketMQ's clients send them, and the permissions of a users
file; no secret ever shows."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from adapter.exceptions import ConfigError
from adapter.proxy.auth import Authenticator, Perm, parse_authorization, signature
from adapter.proxy.codes import Code, ProxyError

pytestmark = pytest.mark.timeout(10)

USERS = """
[[accounts]]
accessKey = "app"
secretKey = "s3cret-app"
topicPerms = ["Orders=PUB", "Audit=PUB|SUB", "Secret=DENY"]
groupPerms = ["GID_app=SUB"]

[[accounts]]
accessKey = "ops"
secretKey = "s3cret-ops"
admin = true
"""
DATE = "20261125T101500Z"


def signed(key: str, secret: str, date: str = DATE) -> dict[str, str]:
    """The headers the 5.x clients send (rocketmq/v5/util/signature.py)."""
    return {
        "x-mq-date-time": date,
        "authorization": f"MQv2-HMAC-SHA1 Credential={key}, SignedHeaders=x-mq-date-time, "
        f"Signature={signature(secret, date)}",
    }


@pytest.fixture
def auth(tmp_path: Path) -> Authenticator:
    path = tmp_path / "users.toml"
    path.write_text(USERS)
    return Authenticator.load(path)


def code_of(auth: Authenticator, metadata: dict[str, str]) -> int:
    with pytest.raises(ProxyError) as caught:
        auth.authenticate(metadata)
    return caught.value.code


def test_a_good_signature_names_its_account(auth: Authenticator) -> None:
    assert auth.authenticate(signed("app", "s3cret-app")).access_key == "app"


def test_the_python_client_s_signature_is_hmac_sha1_of_the_date_in_hex() -> None:
    # rocketmq-python-client 5.1.2: Signature.sign("sk", "20261125T101500Z")
    assert signature("sk", DATE) == "6cb074103e167d720a0dfc2b60890fd1c845a209"


@pytest.mark.parametrize(
    "metadata",
    [
        {},
        signed("app", "wrong"),
        signed("nobody", "s3cret-app"),
        {**signed("app", "s3cret-app"), "x-mq-date-time": "20261125T101501Z"},
        {"authorization": "Basic YXBwOnMzY3JldA=="},
        {"authorization": "MQv2-HMAC-SHA1 Credential=app"},
    ],
)
def test_anything_but_a_good_signature_is_unauthorized(
    auth: Authenticator, metadata: dict[str, str]
) -> None:
    assert code_of(auth, metadata) == Code.UNAUTHORIZED


def test_permissions_follow_the_users_file(auth: Authenticator) -> None:
    app = auth.authenticate(signed("app", "s3cret-app"))
    assert app.may(Perm.PUB, topic="Orders")
    assert not app.may(Perm.SUB, topic="Orders")
    assert app.may(Perm.SUB, topic="Audit", group="GID_app")
    assert not app.may(Perm.PUB, topic="Unlisted")
    with pytest.raises(ProxyError) as caught:
        app.require(Perm.PUB, topic="Secret")
    assert caught.value.code == Code.FORBIDDEN
    assert "Secret" in caught.value.message
    assert auth.authenticate(signed("ops", "s3cret-ops")).may(Perm.PUB, topic="Secret")


def test_without_a_users_file_auth_is_off_and_everything_is_allowed() -> None:
    open_door = Authenticator.load(None)
    assert not open_door.enabled
    assert open_door.authenticate({}).may(Perm.PUB | Perm.SUB, topic="any", group="any")


def test_no_secret_shows_in_a_repr_an_error_or_a_log(
    auth: Authenticator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    account = auth.authenticate(signed("app", "s3cret-app"))
    texts = [repr(account), str(account)]
    for metadata in (signed("app", "wrong"), signed("nobody", "x")):
        with pytest.raises(ProxyError) as caught:
            auth.authenticate(metadata)
        texts.append(str(caught.value))
    texts.append(caplog.text)
    assert not [t for t in texts if "s3cret" in t]


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("", "no \\[\\[accounts\\]\\]"),
        ('[[accounts]]\naccessKey = "a"', "secretKey"),
        ('[[accounts]]\naccessKey = "a"\nsecretKey = "b"\ntopicPerms = ["T=ALL"]', "ALL"),
        ('[[accounts]]\naccessKey = "a"\nsecretKey = "b"\n' * 2, "twice"),
        ("not toml [", "users file"),
    ],
)
def test_a_bad_users_file_is_a_clear_error(tmp_path: Path, content: str, why: str) -> None:
    path = tmp_path / "users.toml"
    path.write_text(content)
    with pytest.raises(ConfigError, match=why):
        Authenticator.load(path)


def test_an_authorization_header_is_read_field_by_field() -> None:
    header = "MQv2-HMAC-SHA1 Credential=ak, SignedHeaders=x-mq-date-time, Signature=abc"
    assert parse_authorization(header) == ("ak", "x-mq-date-time", "abc")
