from __future__ import annotations

import pytest

from adapter.exceptions import TagExpressionError
from adapter.tags import TagFilter

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("expression", ["*", "", None, "  *  "])
def test_star_or_nothing_takes_every_message_tagged_or_not(expression: str | None) -> None:
    f = TagFilter.parse(expression)
    assert f.matches(b"TagA")
    assert f.matches(None)


def test_named_tags_match_exactly_and_untagged_messages_do_not() -> None:
    f = TagFilter.parse("TagA || TagB")
    assert f.matches(b"TagA")
    assert f.matches(b"TagB")
    assert not f.matches(b"TagC")
    assert not f.matches(b"taga")
    assert not f.matches(None)
    assert f.expression == "TagA || TagB"


def test_whitespace_around_tags_is_trimmed_as_rocketmq_does() -> None:
    assert TagFilter.parse("  TagA||TagB ").tags == frozenset({b"TagA", b"TagB"})


def test_bytes_expressions_are_accepted() -> None:
    assert TagFilter.parse(b"TagA").matches(b"TagA")


@pytest.mark.parametrize("expression", ["TagA ||", "|| TagA", "TagA | TagB", "* || TagA", "Tag A"])
def test_malformed_expressions_are_refused(expression: str) -> None:
    with pytest.raises(TagExpressionError, match="malformed tag expression"):
        TagFilter.parse(expression)
