"""The transactor knows when a dropped producer's transaction may have committed."""

from __future__ import annotations

import logging
import threading

import pytest
from confluent_kafka import KafkaError, KafkaException

from adapter.kafka.transactor import Stuck, Transactor

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
