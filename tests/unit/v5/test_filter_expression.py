"""``FilterExpression``: 5.x's defaults, tag expressions, and SQL92 parsed at subscribe."""

from __future__ import annotations

import pytest

from adapter.message_filter import admits
from adapter.tags import TagFilter
from adapter.v5 import (
    ClientConfiguration,
    Credentials,
    FilterExpression,
    FilterType,
    SimpleConsumer,
)
from adapter.v5.exception import (
    BadRequestException,
    IllegalArgumentException,
    IllegalStateException,
)

pytestmark = pytest.mark.timeout(30)

CONFIG = ClientConfiguration("127.0.0.1:1", Credentials())


def test_the_default_expression_takes_every_tag() -> None:
    expression = FilterExpression()

    assert expression.expression == FilterExpression.TAG_EXPRESSION_SUB_ALL == "*"
    assert expression.filter_type == FilterType.TAG == 1
    assert expression.message_filter("T").matches(None)


def test_a_tag_expression_takes_the_tags_it_names_only() -> None:
    tags = FilterExpression("TagA||TagB").message_filter("T")
    assert isinstance(tags, TagFilter)

    assert tags.matches(b"TagA")
    assert tags.matches(b"TagB")
    assert not tags.matches(b"TagC")
    assert not tags.matches(None)


def test_a_sql92_expression_filters_on_every_property_tags_included() -> None:
    sql = FilterExpression("amount > 10 AND TAGS = 'TagA'", FilterType.SQL).message_filter("T")

    assert admits(sql, {"amount": b"11", "TAGS": b"TagA"})
    assert not admits(sql, {"amount": b"9", "TAGS": b"TagA"})
    assert not admits(sql, {"amount": b"11"})


def test_a_bad_sql92_expression_is_a_bad_request_naming_the_column() -> None:
    with pytest.raises(BadRequestException, match=r"Orders.*column 8") as refused:
        FilterExpression("amount > 'ten'", FilterType.SQL).message_filter("Orders")
    assert refused.value.code == 40010


def test_a_malformed_tag_expression_is_a_bad_request() -> None:
    with pytest.raises(BadRequestException, match="Orders") as refused:
        FilterExpression("TagA | TagB").message_filter("Orders")
    assert refused.value.code == 40010


def test_a_simple_consumer_refuses_a_bad_sql92_expression_when_it_is_built() -> None:
    with pytest.raises(BadRequestException, match="column 4"):
        SimpleConsumer(CONFIG, "GID_x", {"Orders": FilterExpression("a >", FilterType.SQL)})


def test_a_simple_consumer_checks_its_group_and_arguments_as_5x_does() -> None:
    with pytest.raises(IllegalArgumentException, match="consumerGroup should not be null"):
        SimpleConsumer(CONFIG, " ")
    with pytest.raises(IllegalArgumentException, match="does not match the regex"):
        SimpleConsumer(CONFIG, "bad group")
    with pytest.raises(IllegalArgumentException, match="awaitDuration"):
        SimpleConsumer(CONFIG, "GID_x", await_duration=None)  # type: ignore[arg-type]
    with pytest.raises(IllegalArgumentException, match="clientConfiguration"):
        SimpleConsumer(None, "GID_x")  # type: ignore[arg-type]


def test_nothing_works_before_startup() -> None:
    consumer = SimpleConsumer(CONFIG, "GID_x")

    assert not consumer.is_running
    assert consumer.consumer_group == "GID_x"
    assert consumer.await_duration == 20
    with pytest.raises(IllegalStateException, match="not running"):
        consumer.receive(1, 10)
    with pytest.raises(IllegalStateException, match="not running"):
        consumer.subscribe("Orders")
    with pytest.raises(IllegalStateException, match="not running"):
        consumer.ack(None)  # type: ignore[arg-type]
