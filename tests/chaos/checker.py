"""Reads a chaos run's whole history and says what went wrong, as openchaos's and Jepsen's
checkers do.

- **lost**: acknowledged (``OK``, and committed for a transaction), never delivered to a group;
- **duplicated**: delivered more than once to one group; for an at-least-once consumer group
  (``redelivery_allowed``: a consumer that crashed or lost its session before it committed
  gets the message again, in RocketMQ as here) these are counted as **redelivered** instead;
- **sent twice**: a send the client stored twice: allowed, and counted, since RocketMQ
  promises a send at least once (its own producer retries), and librdkafka's idempotent
  producer can store a batch twice across a leader change (librdkafka#4953; rarer with one
  request in flight, not gone). A plain send may arrive twice; a delayed message or timer as
  many times as its send stored it in SCHEDULE (``stored``: the run reads SCHEDULE to count),
  since the forwarder forwards each record it holds once. A transaction, and any further copy,
  is **duplicated**;
- **recovered**: an ``UNKNOWN`` outcome that was delivered (allowed, and counted);
- **unexpected**: delivered, but never sent, known failed, or rolled back;
- **early**: a delayed message or timer delivered before its due time (less ``tolerance_s``);
- **out of order**: within a FIFO message group, a group saw a message before one sent before it;
- **recovery time** per fault: from its heal to the first ``OK`` operation of each kind that was
  invoked after the heal.

Pure: a function of the history.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from tests.chaos.history import Fault, History, Kind, Outcome

_SCHEDULED = (Kind.DELAY, Kind.TIMER, Kind.RECALL)
EARLY_TOLERANCE_S = 0.05
"""Clocks and timestamps round: a delivery this much before its due time is not early."""


@dataclass(frozen=True, slots=True)
class Recovery:
    fault: str
    healed_s: float
    first_ok_s: dict[Kind, float | None]
    """Per kind, seconds from the heal to the first OK operation invoked after it (None: none)."""


@dataclass
class Verdict:
    groups: Mapping[str, str]
    acknowledged: int = 0
    delivered: int = 0
    lost: list[tuple[str, str]] = field(default_factory=list)
    """(group, key)"""
    duplicated: list[tuple[str, str, int]] = field(default_factory=list)
    """(group, key, times)"""
    redelivered: list[tuple[str, str, int]] = field(default_factory=list)
    """(group, key, times) in an at-least-once group: allowed, and counted"""
    sent_twice: list[tuple[str, str, int]] = field(default_factory=list)
    """(group, key, times) of a send stored more than once: allowed, and counted"""
    recovered: list[str] = field(default_factory=list)
    unexpected: list[tuple[str, str]] = field(default_factory=list)
    early: list[tuple[str, float]] = field(default_factory=list)
    """(key, seconds early)"""
    out_of_order: list[tuple[str, str, str]] = field(default_factory=list)
    """(consumer group, message group, what came out of its place)"""
    recoveries: list[Recovery] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.lost or self.duplicated or self.unexpected or self.early or self.out_of_order
        )


def check(
    history: History,
    groups: Mapping[str, str],
    redelivery_allowed: tuple[str, ...] = (),
    tolerance_s: float = EARLY_TOLERANCE_S,
    stored: Mapping[str, int] | None = None,
) -> Verdict:
    """The verdict on ``history``, whose consumer ``groups`` (group -> the topic it reads) must
    each see every acknowledged message of their topic, once unless in
    ``redelivery_allowed``; ``stored``: how many times a delayed message or timer was stored
    in SCHEDULE by its send, when more than once."""
    stored = stored or {}
    verdict = Verdict(groups)
    sends = {op.key: op for op in history.operations}
    must = {key for key, op in sends.items() if op.outcome is Outcome.OK and op.committed}
    may = {key for key, op in sends.items() if op.outcome is Outcome.UNKNOWN and op.committed}
    verdict.acknowledged = len(must)
    seen: dict[str, Counter[str]] = {group: Counter() for group in groups}
    recovered: set[str] = set()
    for delivery in history.deliveries:
        verdict.delivered += 1
        seen.setdefault(delivery.consumer, Counter())[delivery.key] += 1
        op = sends.get(delivery.key)
        if delivery.key not in must and delivery.key not in may:
            verdict.unexpected.append((delivery.consumer, delivery.key))
            continue
        if delivery.key in may:
            recovered.add(delivery.key)
        if op is not None and op.due_s is not None and delivery.at_s < op.due_s - tolerance_s:
            verdict.early.append((delivery.key, op.due_s - delivery.at_s))
    verdict.recovered = sorted(recovered)
    for group, counts in seen.items():
        topic = groups.get(group)
        owed = {key for key in must if sends[key].topic == topic}
        verdict.lost.extend((group, key) for key in sorted(owed - set(counts)))
        twice = [(group, key, n) for key, n in sorted(counts.items()) if n > 1]
        if group in redelivery_allowed:
            verdict.redelivered.extend(twice)
            continue
        for item in twice:
            _, key, times = item
            op = sends.get(key)
            plain = op is not None and op.kind is Kind.SEND
            sent_again = op is not None and op.kind in _SCHEDULED and times <= stored.get(key, 1)
            (verdict.sent_twice if plain or sent_again else verdict.duplicated).append(item)
    verdict.out_of_order = _out_of_order(history)
    verdict.recoveries = [_recovery(history, fault) for fault in history.faults]
    return verdict


def _out_of_order(history: History) -> list[tuple[str, str, str]]:
    """Per consumer group and message group, each first delivery whose sequence number is lower
    than one already delivered (a redelivery of an earlier message does not count)."""
    place = {op.key: (op.group, op.seq) for op in history.operations if op.group is not None}
    highest: dict[tuple[str, str], int] = {}
    seen: set[tuple[str, str]] = set()
    wrong: list[tuple[str, str, str]] = []
    for delivery in sorted(history.deliveries, key=lambda d: d.at_s):
        if delivery.key not in place or (delivery.consumer, delivery.key) in seen:
            continue
        seen.add((delivery.consumer, delivery.key))
        group, seq = place[delivery.key]
        assert group is not None
        slot = (delivery.consumer, group)
        if seq < highest.get(slot, -1):
            wrong.append((delivery.consumer, group, delivery.key))
        highest[slot] = max(seq, highest.get(slot, -1))
    return wrong


def _recovery(history: History, fault: Fault) -> Recovery:
    first: dict[Kind, float | None] = {}
    for kind in Kind:
        after = [
            op.completed_s - fault.healed_s
            for op in history.operations
            if op.kind is kind and op.outcome is Outcome.OK and op.invoked_s >= fault.healed_s
        ]
        if any(op.kind is kind for op in history.operations):
            first[kind] = min(after) if after else None
    return Recovery(fault.name, fault.healed_s, first)
