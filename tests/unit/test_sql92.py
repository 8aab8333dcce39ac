"""SQL92 filters: RocketMQ's own test cases as data, a reference evaluator, and bad input.

The table rows come from ``filter/src/test/java/org/apache/rocketmq/filter/ExpressionTest.java``
and ``ParserTest.java`` of apache/rocketmq (expression, properties, whether RocketMQ's
``eval`` helper sees TRUE); values the Java tests put in as numbers are strings here, as every
property of a real message is.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapter.sql92 import Sql92Error, parse

pytestmark = pytest.mark.timeout(60)

AND = "a=3 and b<>4 And c>5 AND d<=4"
OR = "a=3 or b<>4 Or c>5 OR d<=4"
IN = "a in ('3', '4', '5')"
NOT_IN = "a not in ('3', '4', '5')"
NULL_OR = "a is null OR a='hello'"

ROCKETMQ_CASES: list[tuple[str, dict[str, str], bool]] = [
    ("value contains 'x'", {"value": "axb"}, True),
    ("value startswith 'ax'", {"value": "axb"}, True),
    ("value endswith 'xb'", {"value": "axb"}, True),
    ("value not contains 'x'", {"value": "axb"}, False),
    ("value not startswith 'ax'", {"value": "axb"}, False),
    ("value not endswith 'xb'", {"value": "axb"}, False),
    ("value contains 'x'", {"value": "abb"}, False),
    ("value startswith 'x'", {"value": "abb"}, False),
    ("value endswith 'x'", {"value": "abb"}, False),
    ("value not contains 'x'", {"value": "abb"}, True),
    ("value not startswith 'x'", {"value": "abb"}, True),
    ("value not endswith 'x'", {"value": "abb"}, True),
    ("value contains ''", {"value": "axb"}, False),
    ("value startswith ''", {"value": "axb"}, False),
    ("value endswith ''", {"value": "axb"}, False),
    ("value not contains ''", {"value": "axb"}, False),
    ("value not startswith ''", {"value": "axb"}, False),
    ("value not endswith ''", {"value": "axb"}, False),
    ("value contains 'x'", {}, False),
    ("value startswith 'x'", {}, False),
    ("value endswith 'x'", {}, False),
    ("value not contains 'x'", {}, False),
    ("value not startswith 'x'", {}, False),
    ("value not endswith 'x'", {}, False),
    ("'axb' contains 'x'", {"whatever": "whatever"}, True),
    ("'axb' startswith 'ax'", {"whatever": "whatever"}, True),
    ("'axb' endswith 'xb'", {"whatever": "whatever"}, True),
    ("'axb' not contains 'x'", {"whatever": "whatever"}, False),
    ("'axb' not startswith 'ax'", {"whatever": "whatever"}, False),
    ("'axb' not endswith 'xb'", {"whatever": "whatever"}, False),
    ("'axb' contains 'u'", {}, False),
    ("'axb' startswith 'u'", {}, False),
    ("'axb' endswith 'u'", {}, False),
    ("'axb' not contains 'u'", {}, True),
    ("'axb' not startswith 'u'", {}, True),
    ("'axb' not endswith 'u'", {}, True),
    ("'axb' contains ''", {}, False),
    ("'axb' not contains ''", {}, False),
    ("' ' contains ' '", {}, True),
    ("' ' startswith ' '", {}, True),
    ("' ' endswith ' '", {}, True),
    ("' ' not contains ' '", {}, False),
    ("'axb' contains '.'", {}, False),
    ("'axb' not contains '.'", {}, True),
    ("'s' contains '\\'", {}, False),
    ("'s' startswith '\\'", {}, False),
    (
        "a not in ('4', '4', '5') and b between 3 and 10 and c not contains 'axbc'",
        {"a": "3", "b": "3", "c": "axbdc"},
        True,
    ),
    (
        "a not in ('4', '4', '5') and b between 3 and 10 and c not endswith 'axbc'",
        {"a": "3", "b": "3", "c": "axbdc"},
        True,
    ),
    ("TAGS is not null and TAGS='''''tag'''''", {"TAGS": "''tag''"}, True),
    ("a between up and low", {"a": "3.14"}, False),
    ("a between up and low", {"a": "3.14", "up": "up", "low": "low"}, False),
    ("key is not null and key between 0 and 100", {"key": "con"}, False),
    ("a between 0 and 100", {"a": "abc"}, False),
    ("a=b", {"a": "3.14", "b": "3.14"}, True),
    ("a<>b", {"a": "3.14", "b": "3.14"}, False),
    ("a<>b", {"a": "3.14", "b": "3.141"}, True),
    ("a > 3.1E10", {"a": str(3.1415 * 10**10)}, True),
    ("a > 3.14", {"a": "3.1415"}, True),
    ("a > b", {"a": "10", "b": "20"}, False),
    ("a > b", {"a": "20", "b": "10"}, True),
    (NULL_OR, {}, True),
    (NULL_OR, {"a": "hello"}, True),
    (NULL_OR, {"a": "abc"}, False),
    ("a=TRUE OR b=FALSE", {"a": "true", "b": "false"}, True),
    ("a=TRUE OR b=FALSE", {"a": "false", "b": "true"}, False),
    ("a is not null and a='hello'", {"a": "hello"}, True),
    ("a is not null and a='hello'", {}, False),
    (AND, {"a": "3", "b": "5", "c": "6", "d": "1"}, True),
    (AND, {"a": "4", "b": "5", "c": "6", "d": "1"}, False),
    (OR, {"a": "3"}, True),
    (OR, {"a": "4", "b": "5"}, True),
    (OR, {"a": "4", "b": "4", "c": "6"}, True),
    (OR, {"a": "4", "b": "4", "c": "3", "d": "2"}, True),
    (OR, {"a": "4", "b": "4", "c": "3", "d": "10"}, False),
    (IN, {"a": "3"}, True),
    (IN, {"a": "4"}, True),
    (IN, {"a": "5"}, True),
    (IN, {"a": "8"}, False),
    (NOT_IN, {"a": "8"}, True),
    (NOT_IN, {"a": "3"}, False),
    (NOT_IN, {"a": "5"}, False),
    ("a between 2 and 10", {"a": "2"}, True),
    ("a between 2 and 10", {"a": "10"}, True),
    ("a between 2 and 10", {"a": "3"}, True),
    ("a between 2 and 10", {"a": "1"}, False),
    ("a between 2 and 10", {"a": "11"}, False),
    ("a not between 2 and 10", {"a": "1"}, True),
    ("a not between 2 and 10", {"a": "11"}, True),
    ("a not between 2 and 10", {"a": "2"}, False),
    ("a not between 2 and 10", {"a": "10"}, False),
    ("a not between 2 and 10", {"a": "3"}, False),
    ("a is null", {"abc": "2"}, True),
    ("a is null", {"a": "2"}, False),
    ("a is not null", {"a": "2"}, True),
    ("a is not null", {"abc": "2"}, False),
]

# Expressions ParserTest.java expects to parse.
ROCKETMQ_VALID = [
    AND,
    "a=3  and    b<>4 And c>5 AND d<=4",
    OR,
    IN,
    "(a not in ('6', '4', '5')) or (b in ('3', '4', '5'))",
    "(a between 2 and 10) AND (b not between 6 and 9)",
    "a is null",
    "a is not null",
    "a <= now",
    "a=3 and b contains 'xxx' and c not contains 'xxx'",
]


@pytest.mark.parametrize(("expression", "properties", "expected"), ROCKETMQ_CASES)
def test_rocketmq_s_own_cases_give_rocketmq_s_results(
    expression: str, properties: dict[str, str], expected: bool
) -> None:
    assert parse(expression).matches(properties) is expected


@pytest.mark.parametrize("expression", ROCKETMQ_VALID)
def test_the_expressions_rocketmq_parses_parse(expression: str) -> None:
    assert parse(expression).expression == expression


@pytest.mark.parametrize(
    ("expression", "column", "why"),
    [
        ("a and between 2 and 10", 7, "expected a value"),  # ParserTest's invalid expression
        (" a between 10 and 0", 4, "low bound"),  # ParserTest's illegal between
        ("a > 100000000000000000000000", 5, "64 bits"),  # ParserTest's decimal overflow
        ("a > 1" + "1" * 400 + ".5", 5, "out of range"),  # ParserTest's float overflow
        ("value contains x", 16, "string literal"),
        ("value not contains 123", 20, "string literal"),
        ("'axb' contains ", 16, "string literal"),
        ("a > 'x'", 3, "cannot be compared"),
        ("a = NULL", 3, "IS NULL"),
        ("TRUE = 'x'", 6, "boolean"),
        ("'x' AND a", 5, "not a boolean"),
        ("NOT 3", 1, "not a boolean"),
        ("-a", 1, "not a boolean"),
        ("'x' IN ('x')", 5, "property"),
        ("a = 'x", 5, "not closed"),
        ("a != 1", 3, "unexpected character"),
        ("(a = 1", 7, "expected '.'"),
        ("a = 1 b", 7, "expected AND, OR"),
        ("a > 0.0", 5, "0.0"),
        ("a = 01", 6, "expected AND, OR"),
    ],
)
def test_a_bad_expression_is_refused_with_its_column(
    expression: str, column: int, why: str
) -> None:
    with pytest.raises(Sql92Error, match=why) as caught:
        parse(expression)
    assert (caught.value.line, caught.value.column) == (1, column)
    assert f"column {column}" in str(caught.value)


def test_an_error_on_a_later_line_names_that_line() -> None:
    with pytest.raises(Sql92Error) as caught:
        parse("a = 1\n  AND b >")
    assert (caught.value.line, caught.value.column) == (2, 10)  # the end, after ">"


@pytest.mark.parametrize(
    ("expression", "properties", "expected"),
    [
        ("a = 'x'", {}, False),  # unknown
        ("NOT (a = 'x')", {}, False),  # still unknown
        ("NOT ('x' = a)", {}, True),  # RocketMQ: a null right side makes '=' false, not unknown
        ("a = b", {}, True),  # two nulls are equal in RocketMQ's '='
        ("a > 3", {"a": "abc"}, False),  # a property that is not a number: no match
        ("a <> 3", {"a": "abc"}, False),  # ... whichever the operator
        ("a = 3", {"a": "3.0"}, False),  # an integer literal reads the property as Integer
        ("a = 3.0", {"a": "3"}, True),  # a decimal one as Double
        ("a = 3", {"a": "+3"}, True),
        ("a > 2147483647", {"a": "3000000000"}, False),  # Integer.valueOf overflows: no match
        ("a > 2147483648", {"a": "3000000000"}, True),  # a Long literal reads a Long
        ("a <> TRUE", {"a": "yes"}, True),  # Boolean.valueOf: anything but "true" is false
        ("a", {"a": "true"}, False),  # a bare property is true only if boolean: never
        ("a > -1", {"a": "0"}, True),
        ("NOT a = 'x'", {"a": "x"}, False),  # (NOT a) = 'x': a boolean against a string
        ("a = 1 OR b = 2 AND c = 3", {"a": "1"}, True),  # AND binds tighter than OR
        ("(a = 1 OR b = 2) AND c = 3", {"a": "1"}, False),
        ("a IN ('it''s')", {"a": "it's"}, True),
        ("a = 'x' -- a comment\n OR /* another */ b = 'y'", {"b": "y"}, True),
        ("TAGS = 'TagA' AND KEYS = 'k1 k2'", {"TAGS": "TagA", "KEYS": "k1 k2"}, True),
    ],
)
def test_nulls_and_type_mismatches_evaluate_as_in_rocketmq(
    expression: str, properties: dict[str, str], expected: bool
) -> None:
    assert parse(expression).matches(properties) is expected


# -- the evaluator against a small reference evaluator --------------------------------------------

NAMES = ["a", "b", "c"]
VALUES = ["1", "2", "10", "x", "y", "2.5"]


def comparisons() -> st.SearchStrategy[tuple[str, object]]:
    """An atom as text and as a small tree the reference evaluator reads."""
    name = st.sampled_from(NAMES)
    number = st.integers(min_value=0, max_value=12)
    text = st.sampled_from(["x", "y", "1", "10"])
    return st.one_of(
        st.tuples(name, st.sampled_from(["=", "<>", ">", ">=", "<", "<="]), number).map(
            lambda t: (f"{t[0]} {t[1]} {t[2]}", ("num", *t))
        ),
        st.tuples(name, st.sampled_from(["=", "<>"]), text).map(
            lambda t: (f"{t[0]} {t[1]} '{t[2]}'", ("str", *t))
        ),
        st.tuples(name, st.booleans()).map(
            lambda t: (f"{t[0]} IS {'NOT ' if t[1] else ''}NULL", ("null", *t))
        ),
        st.tuples(name, st.booleans(), st.lists(text, min_size=1, max_size=3)).map(
            lambda t: (
                f"{t[0]} {'NOT ' if t[1] else ''}IN ({', '.join(repr(v) for v in t[2])})",
                ("in", *t),
            )
        ),
    )


def expressions() -> st.SearchStrategy[tuple[str, object]]:
    return st.recursive(
        comparisons(),
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from(["AND", "OR"]), inner).map(
                lambda t: (f"({t[0][0]}) {t[1]} ({t[2][0]})", (t[1], t[0][1], t[2][1]))
            ),
            inner.map(lambda t: (f"NOT ({t[0]})", ("NOT", t[1]))),
        ),
        max_leaves=6,
    )


def reference(tree: object, props: dict[str, str]) -> bool | None | str:
    """Three-valued SQL with RocketMQ's reading of properties; "error" when RocketMQ throws."""
    kind = tree[0]  # type: ignore[index]
    if kind in ("AND", "OR"):
        _, left, right = tree  # type: ignore[misc]
        first = reference(left, props)
        if first == "error" or first is (kind == "OR"):
            return first
        second = reference(right, props)
        if second == "error" or second is (kind == "OR"):
            return second
        return None if None in (first, second) else kind == "AND"
    if kind == "NOT":
        inner = reference(tree[1], props)  # type: ignore[index]
        return inner if inner in (None, "error") else not inner
    _, name, *rest = tree  # type: ignore[misc]
    value = props.get(name)
    if kind == "null":
        return (value is not None) is rest[0]
    if kind == "in":
        return None if value is None else (value in rest[1]) is not rest[0]
    if value is None:
        return None
    op, other = rest
    if kind == "str":
        return (value == other) is (op == "=")
    if not value.isdigit():
        return "error"  # against an integer literal the property is read by Integer.valueOf
    number = int(value)
    return {"=": number == other, "<>": number != other, ">": number > other,
            ">=": number >= other, "<": number < other, "<=": number <= other}[op]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    expressions(),
    st.dictionaries(st.sampled_from(NAMES), st.sampled_from(VALUES), max_size=3),
)
def test_the_evaluator_agrees_with_a_reference_evaluator(
    case: tuple[str, object], props: dict[str, str]
) -> None:
    text, tree = case
    assert parse(text).matches(props) is (reference(tree, props) is True)


def test_header_bytes_are_read_as_utf8_text_and_only_the_named_properties_matter() -> None:
    sql = parse("city = 'Zürich' AND b IS NULL")

    assert sql.names == {"city", "b"}
    assert sql.matches_raw({"city": "Zürich".encode(), "other": b"\xff\xfe"})
    assert not sql.matches_raw({"city": "Zürich".encode(), "b": b"\xff"})
