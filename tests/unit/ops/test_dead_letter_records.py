"""A dead letter as an operator reads it, and the copy a resend writes to the retry topic."""

from __future__ import annotations

import base64
import json

import pytest

from adapter import properties as prop
from adapter.consumer.send_back import DLQ_REASON
from adapter.ops.dead_letter_records import (
    RESENT_FROM,
    DeadLetter,
    export_line,
    marker_key,
    preview,
    resent_copy,
    selected,
)

pytestmark = pytest.mark.timeout(10)


def letter(offset: int = 7, at: int = 1_000, msg_id: str = "ID-1", **extra: bytes) -> DeadLetter:
    headers = [
        (prop.UNIQ_KEY, msg_id.encode()),
        (prop.RETRY_TOPIC, b"Orders"),
        (prop.RECONSUME_TIME, b"3"),
        (DLQ_REASON, b"failed 4 deliveries"),
        *extra.items(),
    ]
    return DeadLetter(0, offset, at, b"k", b"body", tuple(headers))


def test_a_dead_letter_names_its_id_original_topic_reason_and_reconsume_times() -> None:
    dead = letter()
    assert (dead.msg_id, dead.topic, dead.reason, dead.reconsume_times) == (
        "ID-1", "Orders", "failed 4 deliveries", "3",
    )  # fmt: skip
    assert dead.place == "0@7"


def test_a_resent_copy_starts_its_retries_afresh_and_names_its_dead_letter() -> None:
    copy = dict(resent_copy(letter(spring=b"\x00\xff"), "%DLQ%G"))
    assert copy[prop.RECONSUME_TIME] == b"0"
    assert copy[RESENT_FROM] == b"%DLQ%G@7"
    assert DLQ_REASON not in copy
    assert copy["spring"] == b"\x00\xff", "the message's own bytes go back as they are"
    assert copy[prop.UNIQ_KEY] == b"ID-1", "a copy keeps its id"


def test_a_resent_copy_of_a_resent_copy_names_only_its_own_dead_letter() -> None:
    again = letter(**{RESENT_FROM: b"%DLQ%G@1"})
    names = [name for name, _ in resent_copy(again, "%DLQ%G")]
    assert names.count(RESENT_FROM) == 1


def test_each_dead_letter_has_its_own_marker_per_group() -> None:
    assert marker_key("G", letter(7)) != marker_key("G", letter(8))
    assert marker_key("G", letter(7)) != marker_key("H", letter(7))


def test_selection_by_id_and_by_window() -> None:
    letters = [letter(1, 100, "A"), letter(2, 200, "B"), letter(3, 300, "C")]
    assert [d.msg_id for d in selected(letters, ["B", "C"], None, None)] == ["B", "C"]
    assert [d.msg_id for d in selected(letters, [], 200, 300)] == ["B"]
    assert [d.msg_id for d in selected(letters, [], None, None)] == ["A", "B", "C"]


def test_an_export_line_keeps_every_byte() -> None:
    line = json.loads(export_line("G", letter(raw=b"\xff")))
    assert base64.b64decode(line["body_base64"]) == b"body"
    assert ["raw", {"base64": "/w=="}] in line["headers"]
    assert line["topic"] == "Orders"


def test_a_body_preview_is_text_or_hex() -> None:
    assert preview(b"hello") == "hello"
    assert preview(b"\xff\x00") == "(2 bytes) ff00"
    assert preview(b"x" * 300, 10).endswith("... (300 bytes)")
