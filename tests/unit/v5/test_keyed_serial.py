"""Tasks of one key run one after another, in order; keys run side by side."""

from __future__ import annotations

import threading

import pytest

from adapter.v5.keyed_serial import KeyedSerial

pytestmark = pytest.mark.timeout(30)


def test_one_key_s_tasks_run_in_order_and_never_two_at_once() -> None:
    serial = KeyedSerial(4, "test")
    ran: list[int] = []
    running = threading.Semaphore(1)
    overlapped = []

    def task(n: int) -> None:
        if not running.acquire(blocking=False):
            overlapped.append(n)
            return
        ran.append(n)
        running.release()

    for n in range(200):
        serial.submit("chat", lambda n=n: task(n))
    serial.shutdown()

    assert ran == list(range(200))
    assert not overlapped


def test_a_key_waiting_on_a_slow_task_does_not_hold_back_another_key() -> None:
    serial = KeyedSerial(2, "test")
    release = threading.Event()
    other_done = threading.Event()
    serial.submit("slow", lambda: release.wait(10))
    serial.submit("fast", other_done.set)

    assert other_done.wait(5), "the other key ran while the slow one waited"
    release.set()
    serial.shutdown()


def test_a_failing_task_does_not_stop_its_key_s_later_tasks() -> None:
    serial = KeyedSerial(1, "test")
    ran: list[str] = []

    def fail() -> None:
        raise RuntimeError("listener bug")

    serial.submit("chat", fail)
    serial.submit("chat", lambda: ran.append("after"))
    serial.shutdown()

    assert ran == ["after"]
