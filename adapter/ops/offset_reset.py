"""The plan of a consumer group's offset reset: from where, to where, and what it skips or replays.

Plays the part of rocketmq-dashboard's "reset consumer offset" and ``mqadmin
resetOffsetByTime``, in two steps as an operator wants them: the plan is printed first, and
nothing changes without ``--execute``. Pure: the shell (:mod:`adapter.ops.groups`) reads the
offsets from Kafka and writes the plan's targets.

A target is a time (the first message stored at or after it: Kafka's ``offsets_for_times``, as
RocketMQ searches its queue by store time), an offset, the earliest retained message or the
end. A target past the end goes to the end; one before the earliest retained message goes to
the earliest, as RocketMQ clamps to the queue's min and max offsets. A group with no commit on a
queue starts from the earliest retained message (the 2.0 consumer's rule), so its plan reads
"from" there.

Known gaps: counts are offsets' differences, so the markers of Kafka transactions count as
messages (one offset each), as they do in ``groups lag``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


class TargetKind(enum.Enum):
    TIME = "time"
    OFFSET = "offset"
    EARLIEST = "earliest"
    LATEST = "latest"


@dataclass(frozen=True, slots=True)
class Target:
    """Where to move a group: ``value`` is epoch milliseconds (``TIME``) or an offset."""

    kind: TargetKind
    value: int = 0

    def describe(self) -> str:
        if self.kind is TargetKind.TIME:
            return f"time {self.value} ms"
        if self.kind is TargetKind.OFFSET:
            return f"offset {self.value}"
        return str(self.kind.value)


@dataclass(frozen=True, slots=True)
class Queue:
    """One partition as Kafka has it now, and the group's commit on it (``None``: no commit)."""

    topic: str
    partition: int
    earliest: int
    end: int
    committed: int | None
    at_time: int | None = None
    """The first offset stored at or after the target time (``None``: no such message)."""


@dataclass(frozen=True, slots=True)
class Move:
    topic: str
    partition: int
    start: int
    to: int

    @property
    def skipped(self) -> int:
        """Messages the group will not be handed (the move is forward)."""
        return max(self.to - self.start, 0)

    @property
    def replayed(self) -> int:
        """Messages the group will be handed again (the move is backward)."""
        return max(self.start - self.to, 0)


def destination(queue: Queue, target: Target) -> int:
    """The offset the group's commit moves to on ``queue``, inside its retained range."""
    if target.kind is TargetKind.EARLIEST:
        wanted = queue.earliest
    elif target.kind is TargetKind.LATEST:
        wanted = queue.end
    elif target.kind is TargetKind.OFFSET:
        wanted = target.value
    else:
        wanted = queue.end if queue.at_time is None else queue.at_time
    return min(max(wanted, queue.earliest), queue.end)


def plan(queues: Iterable[Queue], target: Target) -> list[Move]:
    """One move per queue, in topic and partition order."""
    moves = []
    for queue in sorted(queues, key=lambda q: (q.topic, q.partition)):
        start = (
            queue.earliest if queue.committed is None or queue.committed < 0 else queue.committed
        )
        moves.append(Move(queue.topic, queue.partition, start, destination(queue, target)))
    return moves


def totals(moves: Iterable[Move]) -> Mapping[str, int]:
    listed = list(moves)
    return {
        "skipped": sum(m.skipped for m in listed),
        "replayed": sum(m.replayed for m in listed),
        "unchanged": sum(m.to == m.start for m in listed),
    }
