"""``FilterExpression``: which messages of a topic a 5.x consumer takes, by tag or SQL92.

Reproduces ``rocketmq.v5.model.FilterExpression(expression="*", filter_type=FilterType.TAG)``
of rocketmq-python-client 5.1 (properties ``expression`` and ``filter_type``; the class
constant ``TAG_EXPRESSION_SUB_ALL``) and ``FilterType`` with the 5.x protocol's values
(``TAG`` = 1, ``SQL`` = 2). A tag expression follows the 2.0 consumer's rules
(:mod:`adapter.tags`): ``*`` takes every message, ``TagA||TagB`` the messages tagged ``TagA``
or ``TagB``; a message without a tag matches no named tag.

A SQL92 expression (``FilterType.SQL``, e.g. ``"amount > 100 AND region IN ('eu')"``) follows
RocketMQ's filter module (:mod:`adapter.sql92`) and sees every property of a message, ``TAGS``
and ``KEYS`` included. It is parsed once, when the consumer subscribes (or is built with it);
a bad one is refused there with ``BadRequestException`` (``ILLEGAL_FILTER_EXPRESSION``) naming
the line and column.

On Kafka the filter runs in the client after the share group handed the record over: a record
that does not match is accepted (consumed) without being shown, as a RocketMQ broker skips it
for this group.

Known gaps: RocketMQ makes operators switch SQL92 on per broker (``enablePropertyFilter``);
here it is always on. Malformed tag expressions that RocketMQ reads in a surprising way
(``TagA | TagB``) are refused with ``BadRequestException`` (``ILLEGAL_FILTER_EXPRESSION``).
"""

from __future__ import annotations

from enum import IntEnum

from adapter import sql92
from adapter.exceptions import TagExpressionError
from adapter.message_filter import MessageFilter
from adapter.tags import TagFilter
from adapter.v5.exception import BadRequestException

__all__ = ["FilterExpression", "FilterType", "ILLEGAL_FILTER_EXPRESSION"]

ILLEGAL_FILTER_EXPRESSION = 40010
"""The 5.x protocol's ``Code.ILLEGAL_FILTER_EXPRESSION``."""


class FilterType(IntEnum):
    """The 5.x protocol's ``FilterType``."""

    FILTER_TYPE_UNSPECIFIED = 0
    TAG = 1
    SQL = 2


class FilterExpression:
    """A subscription's filter: a tag expression (``"*"``, ``"TagA||TagB"``) or, with
    ``FilterType.SQL``, a SQL92 one."""

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

    def message_filter(self, topic: str) -> MessageFilter:
        """The parsed filter (adapter side); ``BadRequestException`` naming ``topic`` for a
        malformed expression (for SQL92, with the line and column of the error)."""
        if self._filter_type == FilterType.SQL:
            try:
                return sql92.parse(self._expression)
            except sql92.Sql92Error as exc:
                raise BadRequestException(
                    f"topic {topic!r}: {exc}", ILLEGAL_FILTER_EXPRESSION
                ) from exc
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
