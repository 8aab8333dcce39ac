"""The hops a delayed record can take: the delay levels, then a fine ladder below the shortest.

Reproduces RocketMQ's ``messageDelayLevel`` table as partitions 0 .. L-1 of
``SCHEDULE_TOPIC_XXXX`` (partition = level - 1, as the broker's queue id = level - 1). A timer
message (RocketMQ 5's ``delivery_timestamp``) reaches any time by hopping through them: each hop
waits the largest delay that does not pass its deliver time. Below the shortest level a binary
ladder of fine hops (50, 100, 200, ... ms, each under the shortest level) takes the rest, on
partitions L, L+1, ... of the same topic. RocketMQ 5 has a timing wheel with a precision of 1 s
(``timerPrecisionMs``) instead.

Known gaps: a table whose shortest level is long (say 1 h) makes a long fine ladder (17 hops
of up to 54 min); the default table makes 5.
"""

from __future__ import annotations

from dataclasses import dataclass

from adapter.delay import DelayLevels

FINE_HOP_MS = 50
"""The shortest hop; a timer waits the last part (under this) at the head of its partition."""


def fine_ladder(shortest_level_ms: int) -> tuple[int, ...]:
    """50, 100, 200, ... ms: each fine hop under the shortest level."""
    hops = []
    hop = FINE_HOP_MS
    while hop < shortest_level_ms:
        hops.append(hop)
        hop *= 2
    return tuple(hops)


@dataclass(frozen=True, slots=True)
class HopTable:
    """The delay of every ``SCHEDULE_TOPIC_XXXX`` partition: the levels, then the fine hops."""

    levels: DelayLevels
    fine_ms: tuple[int, ...]

    @classmethod
    def of(cls, levels: DelayLevels) -> HopTable:
        return cls(levels, fine_ladder(min(levels.delays_ms)))

    @property
    def partitions(self) -> int:
        """How many partitions ``SCHEDULE_TOPIC_XXXX`` has."""
        return self.levels.max_level + len(self.fine_ms)

    @property
    def longest_ms(self) -> int:
        return max(self.levels.delays_ms)

    def delay_ms(self, partition: int) -> int:
        """How long a record waits on ``partition``."""
        levels = self.levels.max_level
        if 0 <= partition < levels:
            return self.levels.delays_ms[partition]
        if levels <= partition < self.partitions:
            return self.fine_ms[partition - levels]
        raise ValueError(f"partition {partition} is outside 0..{self.partitions - 1}")

    def level_of(self, partition: int) -> int | None:
        """The delay level a partition holds; None for a fine hop."""
        return partition + 1 if partition < self.levels.max_level else None

    def label(self, partition: int) -> str:
        """The partition's name in logs and metrics: its level, or ``fine-<ms>ms``."""
        level = self.level_of(partition)
        return str(level) if level is not None else f"fine-{self.delay_ms(partition)}ms"

    def partition_for(self, remaining_ms: int) -> int | None:
        """The partition of the longest hop that does not pass ``remaining_ms``; None when
        even the shortest hop would."""
        best: tuple[int, int] | None = None
        for partition in range(self.partitions):
            delay = self.delay_ms(partition)
            if delay <= remaining_ms and (best is None or delay > best[0]):
                best = (delay, partition)
        return None if best is None else best[1]

    @property
    def shortest_partition(self) -> int:
        return min(range(self.partitions), key=self.delay_ms)
