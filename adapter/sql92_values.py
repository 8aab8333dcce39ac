"""How RocketMQ's SQL92 filter compares two values: Java's rules, in Python.

Reproduces ``ComparisonExpression.__compare`` of ``org.apache.rocketmq.filter`` as the broker
runs it (``SelectorParser.parse`` always turns on its string conversion). Values are ``str``
(every property), ``int`` (an integer literal: Java's ``Integer`` inside 32 bits, ``Long``
outside), ``float`` (a decimal literal: ``Double``) or ``bool``. When the two sides differ in
type, the string side is parsed as the other side's type (``Integer.valueOf``,
``Long.valueOf``, ``Double.valueOf``, ``Boolean.valueOf``); a string that does not parse is an
evaluation error (:class:`EvalError`), which the broker logs and treats as "no match". A
number and a boolean compare as "less" (Java's ``-1``), never equal.

Known gaps: Java's hexadecimal floating-point strings (``0x1p3``) and non-ASCII digits are not
accepted as numbers; strings order by code point, not by UTF-16 unit.
"""

from __future__ import annotations

import math
import re

Value = str | int | float | bool

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1

_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_JAVA_DOUBLE = re.compile(
    r"[\x00-\x20]*[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)"
    r"[\x00-\x20]*"
)


class EvalError(Exception):
    """A comparison Java would throw on (a string that is not a number); "no match"."""


def _kind(value: Value) -> str:
    """Java's class of ``value``: ``bool``, ``Integer``, ``Long``, ``Double`` or ``String``."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "Integer" if INT_MIN <= value <= INT_MAX else "Long"
    if isinstance(value, float):
        return "Double"
    return "String"


def java_double(text: str) -> float:
    """``Double.valueOf(text)``; :class:`EvalError` when Java would throw."""
    if not _JAVA_DOUBLE.fullmatch(text):
        raise EvalError(f"not a number: {text!r}")
    core = text.strip("".join(chr(c) for c in range(0x21))).rstrip("fFdD")
    return float(core.replace("Infinity", "inf"))


def _java_integral(text: str, low: int, high: int) -> int:
    if not _JAVA_INTEGER.fullmatch(text):
        raise EvalError(f"not an integer: {text!r}")
    number = int(text)
    if not low <= number <= high:
        raise EvalError(f"integer out of range: {text!r}")
    return number


def _parse_as(text: str, kind: str) -> Value:
    """The string ``text`` read as a value of Java class ``kind``."""
    if kind == "bool":
        return text.lower() == "true"
    if kind == "Integer":
        return _java_integral(text, INT_MIN, INT_MAX)
    if kind == "Long":
        return _java_integral(text, LONG_MIN, LONG_MAX)
    return java_double(text)


def _sign(left: float | int | str | bool, right: float | int | str | bool) -> int:
    if isinstance(left, float) and isinstance(right, float):
        return _double_compare(left, right)
    return (left > right) - (left < right)  # type: ignore[operator]


def _double_compare(left: float, right: float) -> int:
    """``Double.compareTo``: NaN above everything and equal to itself, -0.0 below 0.0."""
    if math.isnan(left) or math.isnan(right):
        return int(math.isnan(left)) - int(math.isnan(right))
    if left == right:
        return _sign(math.copysign(1.0, left), math.copysign(1.0, right)) if left == 0 else 0
    return -1 if left < right else 1


def compare(left: Value, right: Value) -> int:
    """Java's ``__compare(left, right, true)``: negative, zero or positive."""
    lk, rk = _kind(left), _kind(right)
    if lk == rk or (lk in ("Integer", "Long") and rk in ("Integer", "Long")):
        return _sign(left, right)
    if lk == "String":
        return _sign(_parse_as(left, rk), right)  # type: ignore[arg-type]
    if rk == "String":
        if lk == "bool":  # Java casts the Boolean to String here: ClassCastException
            raise EvalError("a boolean cannot be compared with a string")
        return _sign(left, _parse_as(right, lk))  # type: ignore[arg-type]
    if lk == "bool" or rk == "bool":
        return -1
    return _sign(float(left), float(right))


def equal(left: Value, right: Value) -> bool:
    """The non-null branch of RocketMQ's ``=``: same class and equal, else ``compare == 0``."""
    if _kind(left) == _kind(right) and left == right:
        return True
    return compare(left, right) == 0


def order(left: Value, right: Value) -> int:
    """The non-null branch of ``>``, ``>=``, ``<``, ``<=``: two strings compare as doubles."""
    if isinstance(left, str) and isinstance(right, str):
        return _double_compare(java_double(left), java_double(right))
    return compare(left, right)
