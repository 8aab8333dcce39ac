"""A message's life, step by step, from the records it left on Kafka.

RocketMQ's message trace works only when every producer turned ``enableTrace`` on. The adapter
needs no switch: a message leaves a record at every hop (the half message on HALF, the
producer's decision on END, the coordinator's on OP, each check-back request on ``%CHECK%``,
each delay or timer hop on ``SCHEDULE_TOPIC_XXXX``, the delivered record on its topic, and a
consumer group's retries and dead letter on ``%RETRY%`` and ``%DLQ%``), each with its time and
Kafka position. Pure: :mod:`adapter.ops.message_search` finds the records; this orders and words
them.

Known gaps: none.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from adapter import naming
from adapter.wire.records import (
    CheckRequest,
    EndTransaction,
    HalfMessage,
    OpKind,
    OpRecord,
    ScheduledMessage,
)


@dataclass(frozen=True, slots=True)
class Place:
    topic: str
    """The RocketMQ name of the topic."""
    partition: int
    offset: int

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]@{self.offset}"


@dataclass(frozen=True, slots=True)
class Step:
    at_ms: int
    what: str
    where: str = ""


def born(at_ms: int, group: str | None) -> Step:
    return Step(at_ms, "born" + (f" (producer group {group})" if group else ""))


def half_stored(place: Place, at_ms: int, half: HalfMessage) -> Step:
    return Step(at_ms, f"half message stored for {half.topic}", str(place))


def decided(place: Place, at_ms: int, end: EndTransaction) -> Step:
    who = f"check-back {end.check_times}" if end.from_check else "the producer"
    remark = f" ({end.remark})" if end.remark else ""
    return Step(at_ms, f"{end.decision.value} by {who}{remark}", str(place))


def check_asked(place: Place, at_ms: int, check: CheckRequest) -> Step:
    return Step(
        at_ms, f"check-back {check.check_times} asked of group {check.producer_group}", str(place)
    )


def applied(place: Place, at_ms: int, op: OpRecord) -> Step:
    reason = f": {op.reason}" if op.reason else ""
    words = {
        OpKind.COMMIT: "committed: delivered",
        OpKind.ROLLBACK: "rolled back: dropped",
        OpKind.CHECK: f"check-back {op.check_times} recorded",
        OpKind.DISCARD: "discarded by the checker",
    }
    return Step(at_ms, words[op.kind] + reason, str(place))


def scheduled(place: Place, at_ms: int, message: ScheduledMessage) -> Step:
    what = f"on {naming.SCHEDULE_TOPIC} for {message.topic}"
    if naming.is_retry_topic(message.topic):
        what = f"retry {message.reconsume_times} waiting for {message.topic}"
    return Step(at_ms, f"{what} (level {message.level})", str(place))


def delivered(place: Place, at_ms: int) -> Step:
    return Step(at_ms, "delivered", str(place))


def retried(place: Place, at_ms: int, reconsume_times: str) -> Step:
    group = naming.group_of(place.topic) or "?"
    return Step(
        at_ms, f"group {group}: redelivered (reconsume times {reconsume_times})", str(place)
    )


def dead_lettered(place: Place, at_ms: int, reason: str) -> Step:
    group = naming.group_of(place.topic) or "?"
    return Step(at_ms, f"group {group}: dead-lettered ({reason})", str(place))


def consumed_by(group: str, committed: int | None, place: Place) -> str:
    """A group's state for the delivered record at ``place``."""
    if committed is not None and committed > place.offset:
        return f"group {group}: consumed ({place} is behind its commit {committed})"
    commit = "none" if committed is None else str(committed)
    return f"group {group}: not consumed yet (its commit: {commit})"


def _utc(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def timeline(steps: Iterable[Step]) -> list[tuple[str, str, str]]:
    """The steps in time order, each as its time (UTC, to the millisecond), what and where."""
    return [(_utc(s.at_ms), s.what, s.where) for s in sorted(steps, key=lambda s: s.at_ms)]


def render(msg_id: str, steps: Iterable[Step], groups: Iterable[str], scanned: str) -> str:
    ordered = timeline(steps)
    lines = [f"message {msg_id} (times in UTC)"]
    if not ordered:
        lines.append("  no record of it in the window")
    for when, what, where in ordered:
        lines.append(f"  {when}  {what}" + (f"  {where}" if where else ""))
    lines += [f"  {line}" for line in groups]
    lines.append(scanned)
    return "\n".join(lines)
