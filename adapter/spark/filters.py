"""A RocketMQ SQL92 filter as a Spark ``Column``, so a job keeps what a consumer would receive.

``sql92_column("amount > 100 AND TAGS = 'TagA'")`` is a boolean column over the reader's
``properties`` map (:mod:`adapter.spark.columns`: every header, ``TAGS`` and ``KEYS``
included): true exactly when a 5.x consumer subscribed with that expression would be handed
the message, else false, never null. Use it as ``messages.where(sql92_column(expr))``.

The expression is parsed on the driver by the consumers' parser (:mod:`adapter.sql92`), so a
bad one fails when the column is made, with its line and column; its tree is then translated
into built-in Spark expressions (no Python UDF). Each node becomes a value and an "error"
flag, so RocketMQ's rules carry over: three-valued logic, a property read as the number it is
compared with (``Integer.valueOf``, ``Long.valueOf``, ``Double.valueOf``), and a comparison
that would throw in RocketMQ (a property that is not a number) failing the whole expression,
unless ``AND``/``OR`` settled it before, in RocketMQ's left-to-right order.

Known gaps: Java's hexadecimal floating-point strings are not read as numbers, and Spark's
doubles take -0.0 and 0.0 as equal where Java's ``Double.compareTo`` does not.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F

from adapter import sql92
from adapter.sql92_values import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN

__all__ = ["sql92_column"]

Pair = tuple[Column, Column]  # (value, error)

_INTEGER = r"^[+-]?[0-9]+$"
_DOUBLE = (
    r"^[\x00-\x20]*[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)"
    r"[\x00-\x20]*$"
)
_ORDER: dict[str, Callable[[Column, Column], Column]] = {
    ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
}  # fmt: skip
_TEXT: dict[str, Callable[[Column, str], Column]] = {
    "CONTAINS": lambda c, s: c.contains(s),
    "STARTSWITH": lambda c, s: c.startswith(s),
    "ENDSWITH": lambda c, s: c.endswith(s),
}


def _no() -> Column:
    return F.lit(False)


def sql92_column(expression: str, properties: Column | str = "properties") -> Column:
    """A boolean column: does the row's ``properties`` map pass ``expression``?"""
    parsed = sql92.parse(expression)
    column = F.col(properties) if isinstance(properties, str) else properties
    value, error = _Translator(column).pair(parsed.tree)
    passes = F.coalesce(value, _no()) & ~F.coalesce(error, _no())
    return passes.alias(f"sql92({expression})")


def _kind(tree: sql92.Tree) -> str:
    """The Java class a node evaluates to: known before any row is read."""
    head = tree[0]
    if head == "prop":
        return "str"
    if head == "const":
        value = tree[1]
        if value is None or isinstance(value, bool):
            return "null" if value is None else "bool"
        if isinstance(value, int):
            return "int" if INT_MIN <= value <= INT_MAX else "long"
        return "double" if isinstance(value, float) else "str"
    if head == "neg":
        inner = _kind(tree[1])
        return inner if inner in ("int", "long", "double") else "null"
    return "bool"


def _java_number(text: Column, kind: str) -> Pair:
    """``text`` read as Java's ``kind`` (int, long, double): (number, reading failed)."""
    if kind == "double":
        trimmed = F.regexp_replace(text, r"^[\x00-\x20]+|[\x00-\x20]+$", "")
        number = F.regexp_replace(trimmed, "[fFdD]$", "").try_cast("double")
        return number, ~(text.rlike(_DOUBLE) & number.isNotNull())
    low, high = (INT_MIN, INT_MAX) if kind == "int" else (LONG_MIN, LONG_MAX)
    number = text.try_cast("decimal(38,0)")
    ok = text.rlike(_INTEGER) & number.isNotNull() & number.between(low, high)
    return number, ~ok


def _converted(ka: str, a: Column, kb: str, b: Column) -> tuple[Column, Column, Column] | None:
    """Java's ``__compare`` conversions: (left, right, error), or None for "incomparable"
    (a number against a boolean: Java's -1)."""
    if "null" in (ka, kb):
        return F.lit(None), F.lit(None), _no()
    numbers = ("int", "long", "double")
    if ka == kb or (ka in ("int", "long") and kb in ("int", "long")):
        return a, b, _no()
    if ka == "str":
        if kb == "bool":
            return F.lower(a) == "true", b, _no()
        number, failed = _java_number(a, kb)
        return number, b, failed
    if kb == "str":
        if ka == "bool":  # Java casts the Boolean to String: ClassCastException
            return _no(), _no(), F.lit(True)
        number, failed = _java_number(b, ka)
        return a, number, failed
    if ka in numbers and kb in numbers:
        return a.cast("double"), b.cast("double"), _no()
    return None


class _Translator:
    def __init__(self, properties: Column) -> None:
        self.properties = properties

    def pair(self, tree: sql92.Tree) -> Pair:
        head = tree[0]
        if head == "prop":
            return F.try_element_at(self.properties, F.lit(tree[1])), _no()
        if head == "const":
            return F.lit(tree[1]), _no()
        if head in ("and", "or"):
            (av, ae), (bv, be) = self.pair(tree[1]), self.pair(tree[2])
            if head == "and":  # the right side runs unless the left is FALSE
                return av & bv, ae | (F.coalesce(av, F.lit(True)) & be)
            return av | bv, ae | (~F.coalesce(av, _no()) & be)
        if head in ("not", "isnull", "neg", "cast"):
            value, error = self.pair(tree[1])
            return self.unary(head, tree[1], value), error
        if head == "eq":
            return self.equal(tree[1], tree[2])
        if head == "order":
            return self.order(tree[1], tree[2], tree[3])
        if head == "text":
            return self.text(tree[1], tree[2], tree[3], tree[4])
        value, error = self.pair(tree[1])  # "in": a property, so a string or null
        found = value.isin(sorted(tree[2]))
        return F.when(value.isNull(), None).otherwise(~found if tree[3] else found), error

    @staticmethod
    def unary(head: str, inner: sql92.Tree, value: Column) -> Column:
        if head == "not":
            return ~value
        if head == "isnull":
            return value.isNull()
        if head == "neg":
            return -value if _kind(inner) != "null" else F.lit(None)
        # "cast": true only for a boolean value; a property is a string, so false (or null)
        return value if _kind(inner) == "bool" else F.when(value.isNull(), None).otherwise(_no())

    def equal(self, left: sql92.Tree, right: sql92.Tree) -> Pair:
        (av, ae), (bv, be) = self.pair(left), self.pair(right)
        converted = _converted(_kind(left), av, _kind(right), bv)
        same, failed = (_no(), _no()) if converted is None else (
            converted[0] == converted[1], converted[2],
        )  # fmt: skip
        value = (
            F.when(av.isNull() & bv.isNull(), True)
            .when(av.isNull(), None)
            .when(bv.isNull(), False)
            .otherwise(same)
        )
        return value, ae | be | (av.isNotNull() & bv.isNotNull() & failed)

    def order(self, symbol: str, left: sql92.Tree, right: sql92.Tree) -> Pair:
        (av, ae), (bv, be) = self.pair(left), self.pair(right)
        ka, kb = _kind(left), _kind(right)
        accept = _ORDER[symbol]
        if ka == kb == "str":  # two strings compare as doubles in RocketMQ
            (a, a_bad), (b, b_bad) = _java_number(av, "double"), _java_number(bv, "double")
            outcome, failed = accept(a, b), a_bad | b_bad
        elif (converted := _converted(ka, av, kb, bv)) is None:
            outcome, failed = F.lit(symbol.startswith("<")), _no()  # Java's compare gives -1
        else:
            outcome, failed = accept(converted[0], converted[1]), converted[2]
        value = F.when(av.isNull() | bv.isNull(), None).otherwise(outcome)
        # the right side runs only for a non-null left one
        return value, ae | (av.isNotNull() & (be | (bv.isNotNull() & failed)))

    def text(self, test: str, operand: sql92.Tree, search: str, negated: bool) -> Pair:
        if not search:
            return _no(), _no()  # RocketMQ answers false before it reads the value
        value, error = self.pair(operand)
        if _kind(operand) != "str":
            return _no(), error
        found = _TEXT[test](value, search)
        return F.when(value.isNull(), False).otherwise(~found if negated else found), error
