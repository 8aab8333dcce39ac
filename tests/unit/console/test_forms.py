"""Posted forms and query strings into checked values; a reset's target by the command's rule."""

from __future__ import annotations

import io

import pytest

from adapter.console.forms import MAX_BODY, FormError, one, parse, read_body, required, reset_target
from adapter.ops.offset_reset import Target, TargetKind

pytestmark = pytest.mark.timeout(10)


def test_a_posted_form_is_read_to_its_length() -> None:
    body = b"group=GID_a&msg_id=1&msg_id=2&csrf=x&rest"
    fields = read_body(io.BytesIO(body), str(len(body) - 5))
    assert fields["msg_id"] == ["1", "2"]
    assert "rest" not in fields


@pytest.mark.parametrize("length", [str(MAX_BODY + 1), "-1", "lots"])
def test_a_form_too_large_or_of_no_length_is_refused_unread(length: str) -> None:
    stream = io.BytesIO(b"never read")
    with pytest.raises(FormError):
        read_body(stream, length)
    assert stream.tell() == 0


def test_a_blank_field_is_absent_and_a_required_one_says_what_to_give() -> None:
    fields = parse("group=+&topic=T")
    assert one(fields, "group") is None
    assert one(fields, "topic") == "T"
    with pytest.raises(FormError, match="give a group"):
        required(fields, "group", "a group")


@pytest.mark.parametrize(
    ("query", "target"),
    [
        ("kind=earliest", Target(TargetKind.EARLIEST)),
        ("kind=latest&value=ignored", Target(TargetKind.LATEST)),
        ("kind=offset&value=42", Target(TargetKind.OFFSET, 42)),
        ("kind=time&value=1764064800000", Target(TargetKind.TIME, 1764064800000)),
        ("kind=time&value=2025-11-25T10:00:00%2B00:00", Target(TargetKind.TIME, 1764064800000)),
    ],
)
def test_a_reset_target_is_read_as_the_command_reads_it(query: str, target: Target) -> None:
    assert reset_target(parse(query)) == target


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ("", "one of time, offset, earliest, latest"),
        ("kind=yesterday", "one of time"),
        ("kind=offset", "give the offset"),
        ("kind=offset&value=-3", "not a whole number"),
        ("kind=time&value=soon", "is not a time"),
    ],
)
def test_a_bad_reset_target_is_one_clear_line(query: str, error: str) -> None:
    with pytest.raises(FormError, match=error):
        reset_target(parse(query))
