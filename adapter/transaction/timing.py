"""The fast path's timing contract, which the producers and the coordinator both keep.

A transactional producer commits a decision in a Kafka transaction of its own only within
:data:`FAST_COMMIT_WINDOW_MS` of the half message's birth, in transactions that time out after
:data:`FAST_COMMIT_TRANSACTION_TIMEOUT_MS`; the coordinator never checks a half message before
:data:`EARLIEST_CHECK_MS`, so it never races a fast-path decision still in flight.
"""

from __future__ import annotations

FAST_COMMIT_WINDOW_MS = 1_000
"""A producer commits a decision in its own Kafka transaction (the fast path) only when every
record of that transaction was acknowledged within this long of the half message's birth; later
decisions go through the coordinator."""
FAST_COMMIT_TRANSACTION_TIMEOUT_MS = 5_000
"""Kafka's ``transaction.timeout.ms`` for the fast path's producers."""
CLOCK_SKEW_ALLOWANCE_MS = 500
"""How far the clocks of producers and coordinators may disagree without harm."""
EARLIEST_CHECK_MS = FAST_COMMIT_WINDOW_MS + CLOCK_SKEW_ALLOWANCE_MS
"""The coordinator never checks a half message earlier than this after its birth, whatever the
transaction timeout: a fast-path decision may still be in flight until then."""
