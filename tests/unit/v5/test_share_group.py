"""How many attempts a share group gives a message, and the delivery count limit behind them."""

from __future__ import annotations

import pytest

from adapter.v5.share_group import Verdict, attempts_and_limit, judge_delivery

pytestmark = pytest.mark.timeout(30)


def test_rocketmqs_17_attempts_when_the_broker_allows_two_deliveries_more() -> None:
    assert attempts_and_limit(broker_max_count=19, asked=None) == (17, 19)
    assert attempts_and_limit(broker_max_count=30, asked=None) == (17, 30)


def test_on_kafkas_default_limit_of_10_a_group_gets_8_attempts_and_two_spare() -> None:
    assert attempts_and_limit(broker_max_count=10, asked=None) == (8, 10)


def test_the_limit_is_the_brokers_most_so_that_fetches_never_handed_out_have_room() -> None:
    assert attempts_and_limit(broker_max_count=10, asked=2) == (2, 10)
    assert attempts_and_limit(broker_max_count=10, asked=8) == (8, 10)


def test_asked_attempts_may_take_the_second_spare_delivery_but_not_the_first() -> None:
    assert attempts_and_limit(broker_max_count=10, asked=9) == (9, 10)
    with pytest.raises(ValueError, match="at most 9"):
        attempts_and_limit(broker_max_count=10, asked=10)
    with pytest.raises(ValueError, match="1 or more"):
        attempts_and_limit(broker_max_count=10, asked=0)


def test_a_fetch_counts_as_an_attempt_only_if_the_earlier_ones_were_handed_out() -> None:
    # Kafka fetched it three times; twice this consumer released it unseen.
    assert judge_delivery(kafka_count=3, unseen=2, max_attempts=2, limit=10) == (
        1,
        Verdict.DELIVER,
    )
    assert judge_delivery(kafka_count=3, unseen=0, max_attempts=2, limit=10) == (3, Verdict.DEAD)
    assert judge_delivery(kafka_count=1, unseen=0, max_attempts=1, limit=10) == (1, Verdict.DELIVER)


def test_the_fetch_before_the_limit_is_the_last_delivery_and_past_it_a_dead_letter() -> None:
    assert judge_delivery(kafka_count=9, unseen=5, max_attempts=8, limit=10) == (4, Verdict.LAST)
    assert judge_delivery(kafka_count=10, unseen=5, max_attempts=8, limit=10) == (5, Verdict.DEAD)
    assert judge_delivery(kafka_count=8, unseen=5, max_attempts=8, limit=10) == (
        3,
        Verdict.DELIVER,
    )
