"""A real topic refusing deliveries: the back-off, and the verdicts to park a record."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from adapter.schedule.refusals import Refusals, backoff_s

pytestmark = pytest.mark.timeout(30)


def test_refused_deliveries_back_off_exponentially_up_to_thirty_seconds() -> None:
    waits = [backoff_s(n) for n in (1, 2, 3, 4, 20)]
    assert waits[0] < waits[1] < waits[2] < waits[3]
    assert 30 <= waits[4] <= 30.1


def test_refusals_doom_what_no_retry_cures_and_back_off_the_levels_refused_for_a_while() -> None:
    refusals = Refusals()
    refused = refusals.sort(
        [
            (0, 5, KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)),
            (1, 2, KafkaError(KafkaError.NOT_ENOUGH_REPLICAS)),
            (2, 9, KafkaError(KafkaError._PURGE_QUEUE)),
        ]
    )
    assert refused == {1}, "a purged record was not refused"
    assert refusals.doomed == {(0, 5): "refused: Broker: Message size too large"}
    assert [refusals.retry(1)[0] for _ in range(3)] == [1, 2, 3]


def test_a_verdict_stays_until_its_record_commits_and_goes_with_its_level() -> None:
    refusals = Refusals()
    refusals.doom(0, 5, "refused: too large")
    refusals.doom(3, 1, "corrupt: timer headers")
    refusals.retry(3)
    refusals.committed([(7, 7)], [7])
    assert set(refusals.doomed) == {(0, 5), (3, 1)}
    refusals.forget(3)  # the level left this worker: its next owner judges again
    assert set(refusals.doomed) == {(0, 5)}
    assert refusals.retry(3)[0] == 1, "its retries count again"
    refusals.committed([(0, 5)], [0])
    assert refusals.doomed == {}
