"""Telemetry numbers for a known input, and the demo's report and chart.

Known input: five delayed messages (three at level 1, two at level 2) and three timer
messages (5.x ``delivery_timestamp`` 1.5 s ahead: band ``1-10s``) delivered by a real schedule
forwarder, and seven transactional payments of one producer group through a real
coordinator with short check settings: three committed, two rolled back, one committed at its
second check, one never decided (checked twice, then discarded). The expected lateness of each
delivery is computed here from the Kafka records themselves (the SCHEDULE record's append time
plus the level's delay, against the delivered record's time), independently of the job.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pyspark.sql import SparkSession

from adapter import naming, v5
from adapter import properties as prop
from adapter.client import Message, ReceivedMessage, TransactionStatus
from adapter.delay import DelayLevels
from adapter.exceptions import CodecError
from adapter.spark import telemetry
from adapter.spark.config import Job, SparkJobConfig
from adapter.spark.report import draw_chart, format_report, run_report
from adapter.wire import codec
from adapter.wire.records import ScheduledMessage
from tests.spark.conftest import (
    committed as committed_records,
)
from tests.spark.conftest import (
    expected_balances,
    payment_message,
    payments,
    records_of,
)
from tests.support import unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

LEVELS = DelayLevels.parse()
# The first check 3 s after birth: a commit whose fast-path group missed its 1 s window (a new
# producer on a loaded machine) reaches the coordinator as a plain END well before then, so the
# only transactions checked are the two undecided ones.
POLICY = {"transaction_timeout_ms": 3000, "check_interval_ms": 500, "check_max": 2}


def expected_lateness(bootstrap: str, topic: str, ids: set[str]) -> dict[int, list[int]]:
    """Lateness in ms per level of the deliveries of ``ids`` on ``topic``, from Kafka."""
    schedule = naming.kafka_topic(naming.SCHEDULE_TOPIC)
    stored: dict[str, tuple[int, int]] = {}
    for record in records_of(bootstrap, schedule, [0, 1]):
        try:
            scheduled = codec.decode(record.value())
        except CodecError:
            continue  # another test's corrupt record on the shared broker
        if isinstance(scheduled, ScheduledMessage) and scheduled.unique_key in ids:
            stored[scheduled.unique_key] = (scheduled.level, record.timestamp()[1])
    delivered = {}
    for record in records_of(bootstrap, naming.kafka_topic(topic), [0, 1]):
        headers = dict(record.headers() or [])
        uniq = headers.get(prop.UNIQ_KEY, b"").decode()
        if uniq in ids and prop.REAL_TOPIC in headers:
            delivered[uniq] = record.timestamp()[1]
    assert set(stored) == set(delivered) == ids
    lateness: dict[int, list[int]] = defaultdict(list)
    for msg_id, (level, stored_ms) in stored.items():
        lateness[level].append(delivered[msg_id] - stored_ms - LEVELS.delay_ms(level))
    return dict(lateness)


def expected_timer_lateness(bootstrap: str, topic: str, ids: set[str]) -> list[int]:
    """Lateness in ms (delivered - deliver time) of the timer messages ``ids``, from Kafka."""
    lateness = []
    for record in records_of(bootstrap, naming.kafka_topic(topic), [0, 1]):
        headers = dict(record.headers() or [])
        if headers.get(prop.UNIQ_KEY, b"").decode() in ids:
            lateness.append(record.timestamp()[1] - int(headers[prop.TIMER_DELIVER_MS]))
    assert len(lateness) == len(ids)
    return lateness


@pytest.mark.long  # about a minute: two jobs and the report
def test_telemetry_numbers_for_a_known_input_and_the_demo_report(
    spark: SparkSession,
    job_config: Callable[..., SparkJobConfig],
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    new_group: Callable[..., str],
    make_producer: Callable[..., Any],
    make_v5_producer: Callable[..., Any],
    make_transaction_producer: Callable[..., Any],
    start_forwarder: Callable[..., Any],
    start_coordinator: Callable[..., Any],
    tmp_path: Path,
) -> None:
    delayed_topic, paid_topic = new_topic(2, "Reminders"), new_topic(2, "OrderPaid")
    timer_topic = new_topic(2, "Carts")
    group = new_group("PID_pay")
    start_forwarder()
    coordinator = start_coordinator(**POLICY)

    timers = make_v5_producer(timer_topic)
    timer_ids = set()
    for i in range(3):
        timer = v5.Message()
        timer.topic, timer.body = timer_topic, f"expire cart {i}".encode()
        timer.delivery_timestamp = int(time.time() * 1000) + 1500
        timer_ids.add(timers.send(timer).message_id)

    producer = make_producer()
    delayed_ids = set()
    for level in (1, 1, 1, 2, 2):
        message = Message(delayed_topic)
        message.set_body(f"remind at level {level}")
        message.set_delay_time_level(level)
        delayed_ids.add(producer.send_sync(message).msg_id)

    checks: dict[str, int] = defaultdict(int)
    lock = threading.Lock()

    def checker(message: ReceivedMessage) -> TransactionStatus:
        with lock:
            checks[message.keys.decode()] += 1
            count = checks[message.keys.decode()]
        if message.keys.startswith(b"late") and count >= 2:
            return TransactionStatus.COMMIT
        return TransactionStatus.UNKNOWN

    tx = make_transaction_producer(group, checker)
    items = payments(7, prefix=unique("order"))
    outcomes = [TransactionStatus.COMMIT] * 3 + [TransactionStatus.ROLLBACK] * 2
    outcomes += [TransactionStatus.UNKNOWN, TransactionStatus.UNKNOWN]
    committed = items[:3] + [items[5]]
    sent = []
    for i, (payment, outcome) in enumerate(zip(items, outcomes, strict=True)):
        message = payment_message(paid_topic, payment)
        message.set_keys({5: "late-commit", 6: "never"}.get(i, payment.order_id))
        sent.append(tx.send_message_in_transaction(message, lambda _m, _a, o=outcome: o, None))
    never = sent[6].msg_id

    committed_records(kafka_bootstrap, paid_topic, len(committed))
    parked = naming.kafka_topic(naming.TRANS_CHECK_MAX_TIME_TOPIC)

    def discarded() -> bool:  # parked with its DISCARD OP record, in one Kafka transaction
        return any(
            dict(r.headers() or []).get(prop.UNIQ_KEY) == never.encode()
            for r in records_of(kafka_bootstrap, parked, [0])
        )

    wait_until(discarded, timeout=60, interval=0.3, what="the undecided transaction's discard")
    assert not [p for _, p in coordinator.pending() if p.info.producer_group == group]
    assert dict(checks) == {"late-commit": 2, "never": 2}
    committed_records(kafka_bootstrap, delayed_topic, len(delayed_ids))  # level 2: 5 s
    expected = expected_lateness(kafka_bootstrap, delayed_topic, delayed_ids)
    committed_records(kafka_bootstrap, timer_topic, len(timer_ids))
    timer_lateness = expected_timer_lateness(kafka_bootstrap, timer_topic, timer_ids)

    config = job_config(Job.TELEMETRY, delayed_topic, timer_topic, name="telemetry")
    result = telemetry.run_telemetry(config, spark)
    outcome = result.group(group)
    assert outcome is not None
    assert (outcome.transactions, outcome.commits, outcome.rollbacks, outcome.discards) == (
        7,
        4,
        2,
        1,
    )
    assert (outcome.pending, outcome.checks, outcome.checked_transactions) == (0, 4, 2)
    assert outcome.max_checks_per_transaction == 2
    assert outcome.mean_checks_per_transaction == pytest.approx(4 / 7)
    assert outcome.commit_p50_ms is not None
    assert outcome.commit_p50_ms >= 0

    assert [row.level for row in result.lateness] == [1, 2]
    for row in result.lateness:
        values = expected[row.level]
        assert row.deliveries == len(values)
        assert row.p50_ms == pytest.approx(float(np.percentile(values, 50)))
        assert row.p99_ms == pytest.approx(float(np.percentile(values, 99)))
        assert row.max_ms == pytest.approx(float(max(values)))
        assert min(values) >= 0, "delivered before due"
    [band] = result.timers
    assert (band.band, band.label, band.deliveries) == (1, "1-10s", 3)
    assert band.p50_ms == pytest.approx(float(np.percentile(timer_lateness, 50)))
    assert band.max_ms == pytest.approx(float(max(timer_lateness)))
    assert min(timer_lateness) >= 0, "a timer delivered before its time"

    # The demo's function: both jobs, availableNow, results as Python data. Telemetry runs
    # again from its checkpoint: nothing new, the same numbers.
    report = run_report(job_config(Job.POINTS, paid_topic, name="points"), config, spark)
    assert report.telemetry.lateness == result.lateness
    assert report.telemetry.group(group) == outcome
    assert report.telemetry.input_rows == 0
    assert report.points.credited == len(committed)
    assert report.points.balances == expected_balances(committed)
    assert len(report.commit_to_ledger_ms) == len(committed)
    assert all(ms > 0 for ms in report.commit_to_ledger_ms)
    assert report.telemetry.timers == result.timers
    text = format_report(report)
    assert "delay lateness" in text
    assert "timer lateness" in text
    assert group in text
    chart = draw_chart(report, tmp_path / "report.png")
    assert chart.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
