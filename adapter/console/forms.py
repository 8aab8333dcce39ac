"""The console's request parsing: query strings and posted forms into checked values.

Not a RocketMQ behaviour. Pure: the WSGI environ's pieces in, values out. A posted body is at
most :data:`MAX_BODY` bytes (larger: refused, never read), and a field that does not parse is a
:class:`FormError` the page shows as one line, as the commands print one.

Known gaps: only ``application/x-www-form-urlencoded`` bodies (the console's forms post no
files).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import IO
from urllib.parse import parse_qs

import click

from adapter.exceptions import AdapterError
from adapter.ops.groups_cli import target_of
from adapter.ops.offset_reset import Target

MAX_BODY = 64 * 1024
RESET_KINDS = ("time", "offset", "earliest", "latest")


class FormError(AdapterError):
    """A field missing or malformed, or a body too large."""


Fields = dict[str, list[str]]


def parse(text: str) -> Fields:
    return parse_qs(text, keep_blank_values=True, max_num_fields=200)


def read_body(stream: IO[bytes], length: str | None) -> Fields:
    """The posted form of a request whose ``Content-Length`` is ``length``."""
    try:
        size = int(length or 0)
    except ValueError:
        raise FormError("a bad Content-Length") from None
    if size < 0 or size > MAX_BODY:
        raise FormError(f"a form of {size} bytes: at most {MAX_BODY}")
    try:
        return parse(stream.read(size).decode())
    except (UnicodeDecodeError, ValueError) as exc:
        raise FormError(f"a form that does not parse: {exc}") from None


def one(fields: Mapping[str, list[str]], name: str) -> str | None:
    """The field's value, stripped; ``None`` when absent or blank."""
    values = fields.get(name)
    value = values[-1].strip() if values else ""
    return value or None


def required(fields: Mapping[str, list[str]], name: str, what: str | None = None) -> str:
    value = one(fields, name)
    if value is None:
        raise FormError(f"give {what or name}")
    return value


def reset_target(fields: Mapping[str, list[str]]) -> Target:
    """The target of a consumer group reset: ``kind`` (time, offset, earliest, latest) and
    ``value`` (a time as the commands take it, or an offset), through the command's own rule."""
    kind = one(fields, "kind") or ""
    if kind not in RESET_KINDS:
        raise FormError(f"the reset's target is one of {', '.join(RESET_KINDS)}")
    value = one(fields, "value")
    if kind in ("time", "offset") and value is None:
        raise FormError(f"give the {kind} to reset to")
    offset = None
    if kind == "offset":
        if not (value or "").isdigit():
            raise FormError(f"offset {value!r} is not a whole number")
        offset = int(value or 0)
    try:
        return target_of(
            value if kind == "time" else None, offset, kind == "earliest", kind == "latest"
        )
    except click.ClickException as exc:
        raise FormError(exc.format_message()) from None
