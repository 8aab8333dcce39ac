"""How many attempts a share group gives a message, and the delivery count limit behind them."""

from __future__ import annotations

import pytest

from adapter.v5.share_group import attempts_and_limit

pytestmark = pytest.mark.timeout(30)


def test_rocketmqs_17_attempts_when_the_broker_allows_two_deliveries_more() -> None:
    assert attempts_and_limit(broker_max_count=19, asked=None) == (17, 19)
    assert attempts_and_limit(broker_max_count=30, asked=None) == (17, 19)


def test_on_kafkas_default_limit_of_10_a_group_gets_8_attempts_and_two_spare() -> None:
    assert attempts_and_limit(broker_max_count=10, asked=None) == (8, 10)


def test_asked_attempts_keep_two_spare_deliveries_where_they_fit() -> None:
    assert attempts_and_limit(broker_max_count=10, asked=2) == (2, 4)
    assert attempts_and_limit(broker_max_count=10, asked=8) == (8, 10)


def test_asked_attempts_may_take_the_second_spare_delivery_but_not_the_first() -> None:
    assert attempts_and_limit(broker_max_count=10, asked=9) == (9, 10)
    with pytest.raises(ValueError, match="at most 9"):
        attempts_and_limit(broker_max_count=10, asked=10)
    with pytest.raises(ValueError, match="1 or more"):
        attempts_and_limit(broker_max_count=10, asked=0)
