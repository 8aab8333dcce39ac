"""SQL92 property filters, with the grammar and semantics of RocketMQ's ``filter`` module.

Reproduces ``org.apache.rocketmq.filter`` (``SelectorParser.jj`` and the expression classes):
an expression is parsed once into a tree of closures, which a message's properties (all of
them, ``TAGS`` and ``KEYS`` included, every value a string) are then run through.

- Precedence, loosest first: ``OR``; ``AND``; ``=``, ``<>``, ``IS [NOT] NULL``; ``>``,
  ``>=``, ``<``, ``<=``, ``[NOT] BETWEEN``, ``[NOT] IN``, ``[NOT] CONTAINS``,
  ``[NOT] STARTSWITH``, ``[NOT] ENDSWITH``; unary ``+``, ``-`` and ``NOT`` (so
  ``NOT a = 'x'`` is ``(NOT a) = 'x'``, as in RocketMQ); literals, properties, parentheses.
- Keywords are case-insensitive; string literals are quoted with ``'`` (``'it''s'``);
  ``-- comments`` and ``/* comments */`` are skipped.
- Three-valued logic: an absent property is null, a comparison with null is unknown, and only
  ``TRUE`` matches. ``a = 'x'`` with ``a`` absent is unknown (``'x' = a`` is false, as in
  RocketMQ). ``IN``, ``CONTAINS`` and their negations need a string property.
- A property compared with a number is read as that number; when it is not one, the
  comparison throws in RocketMQ, which the broker counts as no match: so here too.
- Refused at parse time, as RocketMQ refuses them: a string or boolean operand of ``>`` (and of
  ``BETWEEN``), ``NULL`` on either side of ``=``, ``BETWEEN 10 AND 0``, ``IN`` after anything
  but a property, an integer beyond 64 bits, a decimal literal of ``0.0`` (RocketMQ's
  ``createFloat`` rejects values below ``Double.MIN_VALUE``), and operands of ``AND``, ``OR``,
  ``NOT`` that are not boolean. Every error names the line and column.

Known gaps: none of the language; see :mod:`adapter.sql92_values` for number parsing.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from adapter.exceptions import AdapterError
from adapter.sql92_values import LONG_MAX, EvalError, Value, compare, equal, order

__all__ = ["Sql92Error", "Sql92Filter", "parse"]

Props = Mapping[str, str]
Eval = Callable[[Props], Value | None]
Tree = tuple[Any, ...]
"""A parsed expression as data (``("eq", ("prop", "a"), ("const", 3))``), for translators."""

_TOKEN = re.compile(
    r"(?P<space>[ \t\n\r\f]+|--[^\n\r]*(?:\n|\r\n?)|/\*[^*]*\*+(?:[^*/][^*]*\*+)*/)"
    r"|(?P<float>[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?"
    r"|[0-9]+[eE][+-]?[0-9]+)"
    r"|(?P<int>0|[1-9][0-9]*[lL]?)"
    r"|(?P<string>'(?:''|[^'])*')"
    r"|(?P<id>[A-Za-z_$][A-Za-z0-9_$]*)"
    r"|(?P<op><>|>=|<=|[=<>(),+-])"
)
_KEYWORDS = frozenset(
    {"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS", "CONTAINS"}
    | {"STARTSWITH", "ENDSWITH"}
)
_ORDER: dict[str, Callable[[int], bool]] = {
    ">": lambda c: c > 0, ">=": lambda c: c >= 0, "<": lambda c: c < 0, "<=": lambda c: c <= 0,
}  # fmt: skip
_TEXT_TESTS: dict[str, Callable[[str, str], bool]] = {
    "CONTAINS": lambda value, search: search in value,
    "STARTSWITH": str.startswith,
    "ENDSWITH": str.endswith,
}


class Sql92Error(AdapterError, ValueError):
    """A SQL92 filter expression RocketMQ would refuse; ``line`` and ``column`` count from 1."""

    def __init__(self, expression: str, offset: int, why: str) -> None:
        self.expression, self.offset = expression, offset
        self.line = expression.count("\n", 0, offset) + 1
        self.column = offset - (expression.rfind("\n", 0, offset) + 1) + 1
        super().__init__(
            f"bad SQL92 filter expression {expression!r}: {why} "
            f"(line {self.line}, column {self.column})"
        )


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "float", "int", "string", "id", "op", a keyword, or "end"
    text: str
    offset: int


@dataclass(frozen=True, slots=True)
class _Node:
    """A parsed operand: its evaluator and what the parser's checks need to know of it."""

    run: Eval
    role: str  # "boolean", "property", "constant" or "value"
    constant: Value | None = None
    tree: Tree = ()


def _tokens(expression: str) -> list[_Token]:
    found, at = [], 0
    while at < len(expression):
        match = _TOKEN.match(expression, at)
        if match is None and expression[at] == "'":
            raise Sql92Error(expression, at, "a string literal is not closed")
        if match is None:
            raise Sql92Error(expression, at, f"unexpected character {expression[at]!r}")
        kind, text = match.lastgroup or "", match.group()
        if kind == "id" and text.upper() in _KEYWORDS:
            kind = text.upper()
        if kind != "space":
            found.append(_Token(kind, text, at))
        at = match.end()
    return [*found, _Token("end", "", len(expression))]


def _constant(value: Value | None, role: str = "constant") -> _Node:
    return _Node(lambda _p: value, role, value, ("const", value))


class _Parser:
    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.tokens = _tokens(expression)
        self.at = 0
        self.names: set[str] = set()

    # -- tokens --------------------------------------------------------------------------------

    def peek(self, ahead: int = 0) -> _Token:
        return self.tokens[min(self.at + ahead, len(self.tokens) - 1)]

    def take(self, *kinds: str) -> _Token | None:
        token = self.peek()
        if token.kind in kinds or (token.kind == "op" and token.text in kinds):
            self.at += 1
            return token
        return None

    def expect(self, kind: str, what: str) -> _Token:
        token = self.take(kind)
        if token is None:
            self.fail(f"expected {what}")
        return token

    def fail(self, why: str, token: _Token | None = None) -> NoReturn:
        token = token or self.peek()
        seen = "the end" if token.kind == "end" else repr(token.text)
        raise Sql92Error(self.expression, token.offset, f"{why}, found {seen}")

    def refuse(self, why: str, token: _Token) -> NoReturn:
        raise Sql92Error(self.expression, token.offset, why)

    # -- grammar -------------------------------------------------------------------------------

    def selector(self) -> _Node:
        start = self.peek()
        node = self.boolean(self.or_expression(), start)
        if self.peek().kind != "end":
            self.fail("expected AND, OR or a comparison")
        return node

    def boolean(self, node: _Node, token: _Token) -> _Node:
        """RocketMQ's ``asBooleanExpression``: a property is cast (true only if boolean)."""
        if node.role == "boolean" or (node.role == "constant" and _is_bool_or_null(node)):
            return node
        if node.role == "property":
            read = node.run
            return _Node(lambda p: _cast(read(p)), "boolean", tree=("cast", node.tree))
        self.refuse("this operand is not a boolean expression", token)

    def or_expression(self) -> _Node:
        left = self.and_expression()
        while token := self.take("OR"):
            left = _or_node(self.boolean(left, token), self.boolean(self.and_expression(), token))
        return left

    def and_expression(self) -> _Node:
        left = self.equality()
        while token := self.take("AND"):
            left = _and_node(self.boolean(left, token), self.boolean(self.equality(), token))
        return left

    def equality(self) -> _Node:
        left = self.comparison()
        while True:
            if token := self.take("=", "<>"):
                right = self.comparison()
                self.check_equal(left, right, token)
                node = _equal_node(left, right)
                left = _negate(node) if token.text == "<>" else node
            elif token := self.take("IS"):
                negated = self.take("NOT") is not None
                self.expect("NULL", "NULL")
                node = _is_null_node(left)
                left = _negate(node) if negated else node
            else:
                return left

    def comparison(self) -> _Node:
        left = self.unary()
        while True:
            token = self.peek()
            negated = token.kind == "NOT" and self.peek(1).kind in (
                "CONTAINS", "STARTSWITH", "ENDSWITH", "BETWEEN", "IN",
            )  # fmt: skip
            if negated:
                self.at += 1
            op = self.peek()
            if op.kind == "op" and op.text in _ORDER and not negated:
                self.at += 1
                left = self.ordering(left, op.text, self.unary(), op)
            elif op.kind in _TEXT_TESTS:
                self.at += 1
                left = _text_node(left, op.kind, self.string_literal(), negated)
            elif op.kind == "BETWEEN":
                self.at += 1
                low = self.unary()
                self.expect("AND", "AND")
                left = self.between(left, low, self.unary(), negated, op)
            elif op.kind == "IN":
                self.at += 1
                left = self.in_list(left, negated, op)
            else:
                return left

    def ordering(self, left: _Node, symbol: str, right: _Node, token: _Token) -> _Node:
        for side in (left, right):
            numeric = isinstance(side.constant, int | float) and not _is_bool_or_null(side)
            if side.role == "boolean" or (side.role == "constant" and not numeric):
                self.refuse(f"this value cannot be compared with {symbol!r}", token)
        return _ordering_node(left, right, symbol)

    def between(self, value: _Node, low: _Node, high: _Node, negated: bool, op: _Token) -> _Node:
        if not negated and low.role == "constant" and high.role == "constant":
            if low.constant is None or high.constant is None:
                self.refuse("the bounds of BETWEEN cannot be NULL", op)
            try:
                backwards = compare(high.constant, low.constant) < 0
            except EvalError as exc:
                self.refuse(f"the bounds of BETWEEN cannot be compared: {exc}", op)
            if backwards:
                self.refuse("the low bound of BETWEEN is above the high bound", op)
        if negated:
            return _or_node(self.ordering(value, "<", low, op), self.ordering(value, ">", high, op))
        return _and_node(self.ordering(value, ">=", low, op), self.ordering(value, "<=", high, op))

    def in_list(self, left: _Node, negated: bool, op: _Token) -> _Node:
        if left.role != "property":
            self.refuse("IN needs a property on its left", op)
        self.expect("(", "'(' after IN")
        items = {self.string_literal()}
        while self.take(","):
            items.add(self.string_literal())
        self.expect(")", "')' or ','")
        return _in_node(left, frozenset(items), negated)

    def check_equal(self, left: _Node, right: _Node, token: _Token) -> None:
        if any(side.role == "constant" and side.constant is None for side in (left, right)):
            self.refuse("NULL cannot be compared with '='; use IS NULL", token)
        both = left.role == right.role == "constant"
        if both and isinstance(left.constant, bool) and not isinstance(right.constant, bool):
            self.refuse("a boolean cannot be compared with this constant", token)

    def unary(self) -> _Node:
        token = self.peek()
        if self.take("+"):
            return self.unary()
        if self.take("-"):
            operand = self.unary()
            inner = operand.run
            return _Node(lambda p: _minus(inner(p)), "value", tree=("neg", operand.tree))
        if self.take("NOT"):
            return _negate(self.boolean(self.unary(), token))
        return self.primary()

    def primary(self) -> _Node:
        token = self.peek()
        if token.kind == "string":
            return _constant(self.string_literal())
        if self.take("int"):
            text = token.text.rstrip("lL")
            if int(text) > LONG_MAX:
                self.refuse("this integer does not fit in 64 bits", token)
            return _constant(int(text))
        if self.take("float"):
            number = float(token.text)
            if number > sys.float_info.max or number < 5e-324:
                self.refuse("this decimal is out of range (RocketMQ refuses 0.0 too)", token)
            return _constant(number)
        if self.take("TRUE", "FALSE", "NULL"):
            return _constant({"TRUE": True, "FALSE": False}.get(token.kind))
        if self.take("id"):
            name = token.text
            self.names.add(name)
            return _Node(lambda p: p.get(name), "property", tree=("prop", name))
        if self.take("("):
            node = self.or_expression()
            self.expect(")", "')'")
            return node
        self.fail("expected a value, a property or '('")

    def string_literal(self) -> str:
        return self.expect("string", "a string literal in quotes").text[1:-1].replace("''", "'")


def _is_bool_or_null(node: _Node) -> bool:
    return node.role == "constant" and (node.constant is None or isinstance(node.constant, bool))


def _cast(value: Value | None) -> bool | None:
    return None if value is None else value is True


def _logic(first: Eval, second: Eval, props: Props, decisive: bool) -> bool | None:
    """RocketMQ's ``OR`` (``decisive`` True) and ``AND`` (False): either side being
    ``decisive`` settles it, else an unknown side leaves it unknown."""
    a = first(props)
    if a is decisive:
        return decisive
    b = second(props)
    if b is decisive:
        return decisive
    return None if a is None or b is None else not decisive


def _or_node(first: _Node, second: _Node) -> _Node:
    run = lambda p: _logic(first.run, second.run, p, True)  # noqa: E731
    return _Node(run, "boolean", tree=("or", first.tree, second.tree))


def _and_node(first: _Node, second: _Node) -> _Node:
    run = lambda p: _logic(first.run, second.run, p, False)  # noqa: E731
    return _Node(run, "boolean", tree=("and", first.tree, second.tree))


def _negate(node: _Node) -> _Node:
    inner = node.run
    run = lambda p: None if (v := inner(p)) is None else v is not True  # noqa: E731
    return _Node(run, "boolean", tree=("not", node.tree))


def _is_null_node(node: _Node) -> _Node:
    value = node.run
    return _Node(lambda p: value(p) is None, "boolean", tree=("isnull", node.tree))


def _minus(value: Value | None) -> Value | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return -value
    return None


def _equal_node(first: _Node, second: _Node) -> _Node:
    left, right = first.run, second.run

    def run(props: Props) -> bool | None:
        a, b = left(props), right(props)
        if a is None or b is None:
            return None if a is None and b is not None else a is None
        return equal(a, b)

    return _Node(run, "boolean", tree=("eq", first.tree, second.tree))


def _ordering_node(first: _Node, second: _Node, symbol: str) -> _Node:
    left, right, accept = first.run, second.run, _ORDER[symbol]

    def run(props: Props) -> bool | None:
        a = left(props)
        if a is None:
            return None
        b = right(props)
        return None if b is None else accept(order(a, b))

    return _Node(run, "boolean", tree=("order", symbol, first.tree, second.tree))


def _text_node(node: _Node, test: str, search: str, negated: bool) -> _Node:
    value, check = node.run, _TEXT_TESTS[test]

    def run(props: Props) -> bool:
        text = value(props)
        if not search or not isinstance(text, str):
            return False
        return check(text, search) is not negated

    return _Node(run, "boolean", tree=("text", test, node.tree, search, negated))


def _in_node(node: _Node, items: frozenset[str], negated: bool) -> _Node:
    value = node.run

    def run(props: Props) -> bool | None:
        text = value(props)
        return (text in items) is not negated if isinstance(text, str) else None

    return _Node(run, "boolean", tree=("in", node.tree, items, negated))


@dataclass(frozen=True, slots=True)
class Sql92Filter:
    """A parsed expression; :meth:`matches` runs it over one message's properties."""

    expression: str
    run: Eval
    names: frozenset[str]
    """The properties the expression reads."""
    tree: Tree = ()
    """The expression as data, for translators (:mod:`adapter.spark.filters`)."""

    def matches(self, properties: Props) -> bool:
        """True only when the expression is TRUE; unknown and evaluation errors are no match,
        as RocketMQ's broker treats them."""
        try:
            return self.run(properties) is True
        except EvalError:
            return False

    def matches_raw(self, properties: Mapping[str, bytes]) -> bool:
        """:meth:`matches` over properties as Kafka headers carry them (UTF-8 bytes)."""
        text = {
            name: raw.decode("utf-8", errors="backslashreplace")
            for name in self.names
            if (raw := properties.get(name)) is not None
        }
        return self.matches(text)


def parse(expression: str) -> Sql92Filter:
    """Parse ``expression`` once; :class:`Sql92Error` (with line and column) when it is bad."""
    parser = _Parser(expression)
    node = parser.selector()
    return Sql92Filter(expression, node.run, frozenset(parser.names), node.tree)
