"""Schema evolution of the system-topic records: which two versions of a schema read each other.

Reproduces no RocketMQ behaviour: a RocketMQ broker keeps its half, op and scheduled messages
inside one broker version. Here producers and workers of different releases share the system
topics during a rolling upgrade, so the records' schemas follow one rule:

    A new version of a record schema only appends fields, each optional: its type is a union
    with ``"null"`` first and its default is ``null``. No field is removed, renamed, reordered
    or retyped, and enum symbols do not change.

Under that rule either version reads the other's records through Avro schema resolution: an
older reader skips the appended fields, a newer one fills the missing ones with null.
:func:`problems` says, in words, why two schemas break the rule (pure; no Kafka, no fastavro).

Known gaps: the rule is stricter than Avro's own resolution rules (no type promotion, no new
enum symbols with a default, no removal of an optional field).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["problems", "is_optional"]

_NOT_TYPE = frozenset({"doc", "aliases", "order"})


def _shape(node: Any) -> Any:
    """A type without documentation, for comparing two field types."""
    if isinstance(node, dict):
        return {k: _shape(v) for k, v in sorted(node.items()) if k not in _NOT_TYPE}
    if isinstance(node, list):
        return [_shape(v) for v in node]
    return node


def is_optional(field: Mapping[str, Any]) -> bool:
    """The field may be absent from the other version: ``["null", ...]`` with default null."""
    kind = field.get("type")
    return (
        isinstance(kind, list)
        and len(kind) >= 2
        and kind[0] == "null"
        and "default" in field
        and field["default"] is None
    )


def problems(reader: Mapping[str, Any], writer: Mapping[str, Any]) -> list[str]:
    """Why a reader of schema ``reader`` may not read records of schema ``writer`` (both
    parsed ``.avsc`` JSON of one record type); empty when it may, in either direction."""
    found: list[str] = []
    ours_name = f"{reader.get('namespace')}.{reader.get('name')}"
    their_name = f"{writer.get('namespace')}.{writer.get('name')}"
    if ours_name != their_name:
        return [f"record {their_name} is not {ours_name}"]
    ours: Sequence[Mapping[str, Any]] = reader.get("fields", [])
    theirs: Sequence[Mapping[str, Any]] = writer.get("fields", [])
    for position, (mine, other) in enumerate(zip(ours, theirs, strict=False)):
        if mine["name"] != other["name"]:
            found.append(
                f"field {position + 1} is {mine['name']!r} here and {other['name']!r} there "
                "(fields are never renamed, removed or reordered)"
            )
        elif _shape(mine["type"]) != _shape(other["type"]):
            found.append(
                f"field {mine['name']!r} is {json.dumps(_shape(mine['type']))} here and "
                f"{json.dumps(_shape(other['type']))} there (fields are never retyped)"
            )
    longer, where = (ours, "here") if len(ours) > len(theirs) else (theirs, "there")
    for extra in longer[min(len(ours), len(theirs)) :]:
        if not is_optional(extra):
            found.append(
                f"field {extra['name']!r}, only {where}, is not optional (an added field must be "
                'a union with "null" first and default null)'
            )
    return found
