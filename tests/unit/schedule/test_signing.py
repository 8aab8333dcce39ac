"""Signed SCHEDULE records: an application's name and key sign what it writes, and the
forwarder's grants take only what a granted application signed, to its own topics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adapter import naming
from adapter.exceptions import ConfigError
from adapter.schedule.grants import ScheduleGrants, Unsigned
from adapter.schedule.signing import (
    ENV_KEY,
    ENV_SIGNER,
    SIGNATURE_HEADER,
    SIGNER_HEADER,
    ScheduleSigner,
)

pytestmark = pytest.mark.timeout(30)

KEY = "k" * 32
ORDERS = ScheduleSigner("orders", KEY.encode())
GRANTS = ScheduleGrants.parse(
    json.dumps(
        {
            "applications": {
                "orders": {"key": KEY, "topics": ["Orders"], "consumer_groups": ["GID_orders"]},
                "payments": {"key": "p" * 32, "topics": ["Payments"]},
            }
        }
    ),
    "grants.json",
)


def headers_of(signer: ScheduleSigner, value: bytes) -> dict[str, bytes]:
    return dict(signer.headers(value))


def test_a_signed_record_names_its_signer_and_the_grants_verify_it() -> None:
    signed = headers_of(ORDERS, b"record")
    assert signed[SIGNER_HEADER] == b"orders"
    assert GRANTS.signer_of(signed[SIGNER_HEADER], signed[SIGNATURE_HEADER], b"record") == "orders"


def test_an_unsigned_record_is_refused() -> None:
    with pytest.raises(Unsigned, match="unsigned"):
        GRANTS.signer_of(None, None, b"record")


def test_a_record_altered_after_signing_is_refused() -> None:
    signed = headers_of(ORDERS, b"to Orders")
    with pytest.raises(Unsigned, match="does not match"):
        GRANTS.signer_of(signed[SIGNER_HEADER], signed[SIGNATURE_HEADER], b"to Payments")


def test_a_record_claiming_another_application_without_its_key_is_refused() -> None:
    forged = headers_of(ScheduleSigner("payments", KEY.encode()), b"record")
    with pytest.raises(Unsigned, match="does not match"):
        GRANTS.signer_of(forged[SIGNER_HEADER], forged[SIGNATURE_HEADER], b"record")


def test_a_signer_missing_from_the_grants_is_refused() -> None:
    stranger = headers_of(ScheduleSigner("stranger", KEY.encode()), b"record")
    with pytest.raises(Unsigned, match="no grant"):
        GRANTS.signer_of(stranger[SIGNER_HEADER], stranger[SIGNATURE_HEADER], b"record")


def test_an_application_reaches_its_topics_and_its_groups_retry_topics_only() -> None:
    assert GRANTS.refusal("orders", "Orders") is None
    assert GRANTS.refusal("orders", naming.retry_topic("GID_orders")) is None
    assert GRANTS.refusal("orders", "Payments") == "'orders' is not granted 'Payments'"
    assert GRANTS.refusal("orders", naming.retry_topic("GID_payments")) is not None
    assert GRANTS.refusal(None, "Orders") is not None


@pytest.mark.parametrize(
    ("document", "fault"),
    [
        ("{", "not JSON"),
        ("{}", "at least one"),
        ('{"applications": {"a": []}}', "must be an object"),
        ('{"applications": {"a": {"key": "short", "topics": []}}}', "at least 16"),
        ('{"applications": {"a": {"key": 7, "topics": []}}}', "'key' must be a string"),
        ('{"applications": {"a": {"key": "' + KEY + '", "topics": "T"}}}', "list of names"),
        ('{"applications": {"a": {"key": "' + KEY + '", "topic": []}}}', "unknown fields"),
    ],
)
def test_a_bad_grants_file_is_refused_naming_the_fault(document: str, fault: str) -> None:
    with pytest.raises(ConfigError, match=fault):
        ScheduleGrants.parse(document, "grants.json")


def test_a_missing_grants_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the schedule grants"):
        ScheduleGrants.load(tmp_path / "absent.json")


def test_the_key_never_shows_in_a_repr() -> None:
    assert KEY not in repr(ORDERS)
    assert KEY not in repr(GRANTS)


def test_the_signer_comes_from_the_environment_with_both_name_and_key() -> None:
    assert ScheduleSigner.from_env({}) is None
    assert ScheduleSigner.from_env({ENV_SIGNER: "orders", ENV_KEY: KEY}) == ORDERS
    with pytest.raises(ConfigError, match=ENV_KEY):
        ScheduleSigner.from_env({ENV_SIGNER: "orders"})
    with pytest.raises(ConfigError, match="at least 16"):
        ScheduleSigner.from_env({ENV_SIGNER: "orders", ENV_KEY: "short"})
