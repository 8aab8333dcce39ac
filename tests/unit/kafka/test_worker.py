"""The exactly-once worker's parts that need no Kafka: how a run of failed turns is logged
(once per change, then a summary, then the recovery), and when the worker is ready."""

from __future__ import annotations

import logging

import pytest

from adapter.clock import ManualClock
from adapter.config import KafkaSettings
from adapter.kafka.worker import READY_TURN_S, ExactlyOnceWorker, FailureLog
from adapter.kafka.worker_config import WorkerConfig

pytestmark = pytest.mark.timeout(30)


def test_failed_turns_are_logged_once_per_change_then_summed_up_then_the_recovery(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock()
    log = logging.getLogger("test.failures")
    failures = FailureLog(log, clock, summary_s=30)
    caplog.set_level(logging.INFO, logger="test.failures")
    for _ in range(40):  # 40 s of a broker away, a turn a second
        failures.failed("coordinator turn", ConnectionError("Connect to 127.0.0.1:9 refused"))
        clock.advance(1000)
    failures.succeeded("coordinator turn")
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3
    assert messages[0].startswith("coordinator turn failed: Connect to 127.0.0.1:9 refused")
    assert messages[1].startswith(
        "coordinator turn still failing after 30 s (31 failed turns), now:"
    )
    assert messages[2] == "coordinator turn works again after 40 s (40 failed turns)"


def test_another_cause_during_the_same_outage_waits_for_the_summary() -> None:
    clock = ManualClock()
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    log = logging.getLogger("test.failures.kinds")
    log.addHandler(handler)
    failures = FailureLog(log, clock, summary_s=30)
    failures.failed("turn", TimeoutError("timed out"))
    failures.failed("turn", PermissionError("not coordinator"))
    assert len(records) == 1
    clock.advance(30_000)
    failures.failed("turn", PermissionError("not coordinator"))
    assert records[-1].endswith("now: not coordinator")


class Idle(ExactlyOnceWorker[WorkerConfig]):
    """A worker with nothing to do, to read its health on a manual clock."""

    name = "idle worker"
    log = logging.getLogger("test.idle")
    group = "GID_idle"

    def setup(self) -> None:
        pass

    def reads(self) -> list[str]:
        return []

    def run_once(self) -> int:
        return 0

    def idle(self) -> bool:
        return True


def test_a_worker_whose_turn_is_stuck_on_kafka_stops_being_ready_before_the_turn_fails() -> None:
    clock = ManualClock()
    worker = Idle(WorkerConfig(KafkaSettings("127.0.0.1:9"), worker_id="w"), clock=clock)
    worker._on_assign(None, [])  # the group's answer, as librdkafka calls it
    worker.last_turn_at = clock.monotonic()
    assert worker.ready()
    clock.advance(int(READY_TURN_S * 1000) + 1)  # the turn in hand waits on a Kafka that is gone
    assert not worker.ready()
    assert worker.alive(60), "still alive: the loop is not dead, only waiting"
