"""A subscription's filter, tag or SQL92, applied to one message's properties.

RocketMQ subscribes with either a tag expression (:mod:`adapter.tags`) or a SQL92 expression
(:mod:`adapter.sql92`, ``ExpressionType.SQL92``). A SQL92 filter sees every property of the
message, user properties and the system ones alike (``TAGS``, ``KEYS``, ``UNIQ_KEY`` ...), as
RocketMQ's broker hands the whole property map to the expression. A message the filter
refuses is consumed without being shown, as a broker-side filter skips it.

Known gaps: none.
"""

from __future__ import annotations

from collections.abc import Mapping

from adapter import properties as prop
from adapter.sql92 import Sql92Filter
from adapter.tags import TagFilter

__all__ = ["MessageFilter", "admits"]

MessageFilter = TagFilter | Sql92Filter


def admits(message_filter: MessageFilter, properties: Mapping[str, bytes]) -> bool:
    """Whether a message with ``properties`` (as Kafka headers carry them) passes."""
    if isinstance(message_filter, TagFilter):
        return message_filter.matches(properties.get(prop.TAGS))
    return message_filter.matches_raw(properties)
