"""The exactly-once worker's loop against a real broker: an outage is retried, a bug is not."""

from __future__ import annotations

import threading

import pytest

from adapter.config import KafkaSettings
from adapter.exceptions import Bug, TopicLayoutError
from adapter.transaction.config import CoordinatorConfig
from adapter.transaction.coordinator import TransactionCoordinator
from adapter.transaction.half_state import IllegalTransition
from tests.support import unique

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]


def test_a_bug_stops_the_worker_at_once_with_its_reason_instead_of_being_retried(
    system_topics: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = TransactionCoordinator(
        CoordinatorConfig(KafkaSettings(system_topics), worker_id=unique("bug"), max_wait_ms=100)
    )
    turns = 0

    def broken_turn() -> int:
        nonlocal turns
        turns += 1
        raise IllegalTransition("a committed half message cannot become checking")

    monkeypatch.setattr(worker, "run_once", broken_turn)
    raised: list[BaseException] = []

    def run() -> None:
        try:
            worker.run()
        except BaseException as exc:  # noqa: BLE001 - the test looks at it
            raised.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(90)
    assert not thread.is_alive(), "the worker stopped"
    [error] = raised
    assert isinstance(error, Bug)
    assert "cannot become checking" in str(error)
    assert turns == 1, "not retried"
    assert not worker.failures.failing, "a bug is not an outage"


def test_topics_that_break_the_layout_stop_the_worker_instead_of_a_retry_loop(
    system_topics: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = TransactionCoordinator(
        CoordinatorConfig(KafkaSettings(system_topics), worker_id=unique("layout"))
    )
    prepared = 0

    def wrong_layout() -> None:
        nonlocal prepared
        prepared += 1
        raise TopicLayoutError("RMQ_SYS_TRANS_END_TOPIC has 4 partitions, HALF 8")

    monkeypatch.setattr(worker, "prepare", wrong_layout)
    with pytest.raises(TopicLayoutError, match="4 partitions"):
        worker.run()
    assert prepared == 1, "not retried"
