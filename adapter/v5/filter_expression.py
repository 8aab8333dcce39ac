"""``FilterExpression``: which messages of a topic a 5.x consumer takes, by tag.

Reproduces ``rocketmq.v5.model.FilterExpression(expression="*", filter_type=FilterType.TAG)``
of rocketmq-python-client 5.1 (properties ``expression`` and ``filter_type``; the class
constant ``TAG_EXPRESSION_SUB_ALL``) and ``FilterType`` with the 5.x protocol's values
(``TAG`` = 1, ``SQL`` = 2). A tag expression follows the 2.0 consumer's rules
(:mod:`adapter.tags`): ``*`` takes every message, ``TagA||TagB`` the messages tagged ``TagA``
or ``TagB``; a message without a tag matches no named tag.

On Kafka the filter runs in the client after the share group handed the record over: a record
that does not match is accepted (consumed) without being shown, as a RocketMQ broker skips it
for this group.

Known gaps: SQL92 expressions (``FilterType.SQL``) are refused with ``UnsupportedException``
when a consumer is given one (Kafka has no broker-side property filter, and evaluating SQL92 in
the client is not implemented). Malformed tag expressions that RocketMQ reads in a surprising
way (``TagA | TagB``) are refused with ``BadRequestException`` (``ILLEGAL_FILTER_EXPRESSION``).
"""

from __future__ import annotations

from enum import IntEnum

from adapter.exceptions import TagExpressionError
from adapter.tags import TagFilter
from adapter.v5.exception import BadRequestException, UnsupportedException

__all__ = ["FilterExpression", "FilterType", "ILLEGAL_FILTER_EXPRESSION"]

ILLEGAL_FILTER_EXPRESSION = 40010
"""The 5.x protocol's ``Code.ILLEGAL_FILTER_EXPRESSION``."""


class FilterType(IntEnum):
    """The 5.x protocol's ``FilterType``."""

    FILTER_TYPE_UNSPECIFIED = 0
    TAG = 1
    SQL = 2


class FilterExpression:
    """A subscription's filter: a tag expression (``"*"``, ``"TagA||TagB"``)."""

    TAG_EXPRESSION_SUB_ALL = "*"

    def __init__(
        self, expression: str = TAG_EXPRESSION_SUB_ALL, filter_type: FilterType = FilterType.TAG
    ) -> None:
        self._expression = expression
        self._filter_type = filter_type

    @property
    def expression(self) -> str:
        return self._expression

    @property
    def filter_type(self) -> FilterType:
        return self._filter_type

    def tag_filter(self, topic: str) -> TagFilter:
        """The parsed tag filter (adapter side); ``UnsupportedException`` for SQL92,
        ``BadRequestException`` for a malformed tag expression, both naming ``topic``."""
        if self._filter_type == FilterType.SQL:
            raise UnsupportedException(
                f"SQL92 filter expressions are not supported by adapter.v5 (topic {topic!r}, "
                f"expression {self._expression!r}): Kafka has no broker-side property filter; "
                "subscribe with a tag expression (FilterExpression('TagA||TagB')) and check "
                "properties in the application",
                50500,
            )
        if self._filter_type != FilterType.TAG:
            raise BadRequestException(
                f"unknown filter type {self._filter_type!r} for topic {topic!r}",
                ILLEGAL_FILTER_EXPRESSION,
            )
        try:
            return TagFilter.parse(self._expression)
        except TagExpressionError as exc:
            raise BadRequestException(f"topic {topic!r}: {exc}", ILLEGAL_FILTER_EXPRESSION) from exc

    def __repr__(self) -> str:
        return f"FilterExpression({self._expression!r}, {self._filter_type.name})"
