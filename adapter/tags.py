"""Tag subscription expressions: ``*`` and ``TagA || TagB``.

Reproduces ``FilterAPI.buildSubscriptionData`` for ``ExpressionType.TAG``: an empty expression
or ``*`` takes every message, tagged or not; otherwise the expression is split on ``||``, each
part is trimmed, and a message matches when its tag is one of the parts (a message without a
tag matches no named tag). The filtering happens in the consumer, after Kafka delivered the
record: a filtered message still counts as consumed, as a RocketMQ broker-side filter skips it.

Known gaps: SQL92 expressions are not supported and are refused. RocketMQ silently accepts
odd expressions (``TagA | TagB`` becomes one tag with a space and a bar in it, empty parts are
dropped); here they are errors, since they are almost always typos.
"""

from __future__ import annotations

from dataclasses import dataclass

from adapter.exceptions import TagExpressionError

MATCH_ALL = "*"


@dataclass(frozen=True, slots=True)
class TagFilter:
    """A parsed expression. ``tags`` is ``None`` for "every message"."""

    expression: str
    tags: frozenset[bytes] | None

    @classmethod
    def parse(cls, expression: str | bytes | None) -> TagFilter:
        if isinstance(expression, bytes):
            expression = expression.decode("utf-8")
        text = (expression or "").strip()
        if text in ("", MATCH_ALL):
            return cls(MATCH_ALL, None)
        parts = [part.strip() for part in text.split("||")]
        for part in parts:
            if not part:
                raise TagExpressionError(
                    f"malformed tag expression {text!r}: an empty tag around '||'"
                )
            if part == MATCH_ALL:
                raise TagExpressionError(
                    f"malformed tag expression {text!r}: '*' cannot be combined with tags"
                )
            if "|" in part or any(ch.isspace() for ch in part):
                raise TagExpressionError(
                    f"malformed tag expression {text!r}: tag {part!r} holds '|' or a space; "
                    "separate tags with ' || '"
                )
        return cls(" || ".join(parts), frozenset(part.encode("utf-8") for part in parts))

    def matches(self, tag: bytes | None) -> bool:
        if self.tags is None:
            return True
        return tag is not None and tag in self.tags
