"""A batch prepared ahead of its due time waits for it, on the forwarder's clock.

Not in RocketMQ, which begins a delivery once it is due. The forwarder begins a batch's Kafka
transaction ``prepare_ahead_ms`` before its records fall due and sends its consumed positions
then (the slow half of a transaction); :func:`wait_until_due` holds the produce and the commit
until every record of the batch is due, so nothing is written early.

Known gaps: the wait spins in steps of up to 5 ms of real time.
"""

from __future__ import annotations

import time

from adapter.clock import SYSTEM_CLOCK, Clock


class NotDue(Exception):
    """The batch was prepared ahead of its due time, and that time did not come."""


def wait_until_due(clock: Clock, due_ms: int, ahead_ms: int) -> None:
    """Sleep until ``due_ms`` on ``clock``; :class:`NotDue` if that clock has not got there
    after ``ahead_ms`` and a little more of real time (a manual clock in a test, or a clock
    set back)."""
    give_up = SYSTEM_CLOCK.monotonic() + (ahead_ms + 20) / 1000
    while (left_ms := due_ms - clock.now_ms()) > 0:
        if SYSTEM_CLOCK.monotonic() >= give_up:
            raise NotDue(f"not due for another {left_ms} ms by the forwarder's clock")
        time.sleep(min(left_ms, 5) / 1000)
