"""``FilterExpression``: 5.x's defaults, tag expressions, and SQL92 refused by name."""

from __future__ import annotations

import pytest

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
    UnsupportedException,
)

pytestmark = pytest.mark.timeout(30)

CONFIG = ClientConfiguration("127.0.0.1:1", Credentials())


def test_the_default_expression_takes_every_tag() -> None:
    expression = FilterExpression()

    assert expression.expression == FilterExpression.TAG_EXPRESSION_SUB_ALL == "*"
    assert expression.filter_type == FilterType.TAG == 1
    assert expression.tag_filter("T").matches(None)


def test_a_tag_expression_takes_the_tags_it_names_only() -> None:
    tags = FilterExpression("TagA||TagB").tag_filter("T")

    assert tags.matches(b"TagA")
    assert tags.matches(b"TagB")
    assert not tags.matches(b"TagC")
    assert not tags.matches(None)


def test_sql92_is_refused_naming_the_feature() -> None:
    with pytest.raises(UnsupportedException, match="SQL92 filter expressions are not supported"):
        FilterExpression("amount > 10", FilterType.SQL).tag_filter("Orders")


def test_a_malformed_tag_expression_is_a_bad_request() -> None:
    with pytest.raises(BadRequestException, match="Orders") as refused:
        FilterExpression("TagA | TagB").tag_filter("Orders")
    assert refused.value.code == 40010


def test_a_simple_consumer_refuses_sql92_when_it_is_built() -> None:
    with pytest.raises(UnsupportedException, match="SQL92"):
        SimpleConsumer(CONFIG, "GID_x", {"Orders": FilterExpression("a > 1", FilterType.SQL)})


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
