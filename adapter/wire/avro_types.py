"""Cheap checks that a field value fits its Avro type, for the types the schemas use.

Reproduces no RocketMQ behaviour: :mod:`adapter.wire.codec` runs them before writing, since
fastavro's own validator is slow and its writer wraps some out-of-range values around.

Known gaps: only the types the record schemas use (primitives, null unions, string maps,
enums, logical types over primitives); anything else is refused when a schema is loaded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from adapter.exceptions import CodecError

__all__ = ["Check", "check_for"]

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1

Check = Callable[[Any], bool]


def _is_int(value: Any) -> bool:
    return type(value) is int and _INT_MIN <= value <= _INT_MAX


def _is_long(value: Any) -> bool:
    return type(value) is int and _LONG_MIN <= value <= _LONG_MAX


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_bytes(value: Any) -> bool:
    return isinstance(value, (bytes, bytearray))


def _is_bool(value: Any) -> bool:
    return type(value) is bool


def _is_enum_symbol(value: Any) -> bool:
    return isinstance(value, str)  # the record holds an Enum member; checked before


def _is_str_map(value: Any) -> bool:
    return isinstance(value, dict) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


def _optional(check: Check) -> Check:
    return lambda value: value is None or check(value)


_PRIMITIVE_CHECKS: dict[str, Check] = {
    "int": _is_int,
    "long": _is_long,
    "string": _is_str,
    "bytes": _is_bytes,
    "boolean": _is_bool,
}


def check_for(avro_type: Any, where: str) -> Check:
    """A cheap type check for the field types the schemas use (fastavro's validator is slow)."""
    if isinstance(avro_type, str) and avro_type in _PRIMITIVE_CHECKS:
        return _PRIMITIVE_CHECKS[avro_type]
    if isinstance(avro_type, list) and len(avro_type) == 2 and "null" in avro_type:
        (other,) = [t for t in avro_type if t != "null"]
        return _optional(check_for(other, where))
    if isinstance(avro_type, dict):
        kind = avro_type.get("type")
        if kind == "map" and avro_type.get("values") == "string":
            return _is_str_map
        if kind == "enum":
            return _is_enum_symbol
        if kind in _PRIMITIVE_CHECKS and len(avro_type) <= 2:  # e.g. a logical type
            return check_for(kind, where)
    raise CodecError(f"{where}: unsupported Avro type {avro_type!r}")
