"""The one header builder: what every message on a real topic carries, and in which order."""

from __future__ import annotations

import pytest

from adapter import properties as prop

pytestmark = pytest.mark.timeout(30)


def test_identity_comes_first_then_properties_then_extras() -> None:
    headers = prop.message_headers(
        "ID", tags="TagA", keys="k1", properties={"color": "blue"}, extra=[("X", "1")]
    )
    assert headers == [
        ("UNIQ_KEY", b"ID"),
        ("TAGS", b"TagA"),
        ("KEYS", b"k1"),
        ("color", b"blue"),
        ("X", b"1"),
    ]


def test_a_stale_copy_in_the_properties_never_wins_over_the_fields() -> None:
    headers = dict(
        prop.message_headers(
            "ID",
            tags="new",
            properties={"UNIQ_KEY": "old", "TAGS": "old", "PGROUP": "old", "keep": "yes"},
            extra=[("PGROUP", "new")],
        )
    )
    assert headers == {"UNIQ_KEY": b"ID", "TAGS": b"new", "PGROUP": b"new", "keep": b"yes"}


def test_omitted_properties_are_left_out() -> None:
    headers = prop.message_headers(
        "ID", properties={"REAL_TOPIC": "T", "a": "b"}, omit={"REAL_TOPIC"}
    )
    assert headers == [("UNIQ_KEY", b"ID"), ("a", b"b")]


def test_the_born_time_is_added_unless_the_properties_carry_one() -> None:
    assert ("BORN_TIMESTAMP", b"5") in prop.message_headers("ID", born_ms=5)
    kept = prop.message_headers("ID", properties={"BORN_TIMESTAMP": "3"}, born_ms=5)
    assert [v for k, v in kept if k == "BORN_TIMESTAMP"] == [b"3"]
