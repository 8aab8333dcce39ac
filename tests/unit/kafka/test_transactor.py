"""The transactor knows when a dropped producer's transaction may have committed."""

from __future__ import annotations

import logging
import threading

import pytest
from confluent_kafka import KafkaError, KafkaException

from adapter.clock import SYSTEM_CLOCK
from adapter.kafka.transactor import Fenced, Stuck, Transactor, within

pytestmark = pytest.mark.timeout(10)


def transactor() -> Transactor:
    return Transactor(
        dict, timeout_s=1.0, log=logging.getLogger("test"), stopping=threading.Event()
    )


def in_a_transaction() -> Transactor:
    tx = transactor()
    tx.in_transaction = True
    return tx


def error(code: int, **flags: bool) -> KafkaException:
    return KafkaException(KafkaError(code, "injected", **flags))


def test_a_timed_out_commit_leaves_the_transaction_in_doubt_until_the_worker_settles_it() -> None:
    tx = in_a_transaction()
    tx.fail(error(KafkaError._TIMED_OUT, retriable=True))
    assert tx.in_doubt
    assert not tx.started
    tx.settled()
    assert not tx.in_doubt


def test_a_stuck_call_leaves_the_transaction_in_doubt() -> None:
    tx = in_a_transaction()
    tx.fail(Stuck("commit_transaction did not return"))
    assert tx.in_doubt


def test_an_abortable_error_aborts_and_leaves_nothing_in_doubt() -> None:
    tx = in_a_transaction()
    tx.fail(error(KafkaError.MSG_SIZE_TOO_LARGE, txn_requires_abort=True))
    assert not tx.in_doubt
    assert not tx.in_transaction


def test_a_producer_dropped_between_transactions_leaves_nothing_in_doubt() -> None:
    tx = transactor()
    tx.drop()
    assert not tx.in_doubt


# -- the watchdog on blocking calls ----------------------------------------------------


def test_a_call_that_returns_in_time_gives_its_value() -> None:
    assert within(1.0, "add", lambda: 1 + 1) == 2


def test_a_call_that_raises_raises_in_the_caller() -> None:
    def fail() -> None:
        raise ValueError("inner")

    with pytest.raises(ValueError, match="inner"):
        within(1.0, "fail", fail)


def test_a_call_that_overstays_its_deadline_is_abandoned_as_stuck() -> None:
    forever = threading.Event()
    with pytest.raises(Stuck, match="send_offsets_to_transaction did not return within 0.2 s"):
        within(0.2, "send_offsets_to_transaction", lambda: forever.wait(30))
    forever.set()


# -- fatal errors ------------------------------------------------------------------------


def fatal(code: int) -> KafkaError:
    return KafkaError(code, "injected", fatal=True)


def test_a_fence_starts_a_new_producer_and_never_stops_the_worker() -> None:
    tx = transactor()
    for _ in range(6):
        tx._on_fatal(fatal(KafkaError._FENCED))
    assert not tx.started


def test_fences_in_a_row_wait_longer_each_time_up_to_half_a_minute() -> None:
    tx = transactor()
    waits = []
    for _ in range(9):
        tx._on_fatal(fatal(KafkaError._FENCED))
        waits.append(round(max(0.0, tx._resume_at - SYSTEM_CLOCK.monotonic())))
    assert waits == [0, 1, 2, 4, 8, 16, 30, 30, 30]


def test_another_fatal_error_twice_within_a_minute_stops_the_worker() -> None:
    tx = transactor()
    tx._on_fatal(fatal(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    with pytest.raises(Fenced, match="refuses its transactional id"):
        tx._on_fatal(fatal(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
