"""RocketMQ delay levels: the ``messageDelayLevel`` table.

Reproduces ``ScheduleMessageService.parseDelayLevel``: a space-separated list such as the
default ``1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h``, each entry a number
and a unit (``s``, ``m``, ``h``, ``d``); level n is the n-th entry; a level above the highest
is clamped to it, and a level of 0 or less means "no delay".

Known gaps: RocketMQ ignores entries it cannot parse at startup only by logging; here a bad
string is an error, since a silently shorter table would move messages to other levels.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from adapter.exceptions import ConfigError

DEFAULT_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNITS_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_ENTRY = re.compile(r"^(\d+)([smhd])$")


@dataclass(frozen=True, slots=True)
class DelayLevels:
    """The delay of each level, in milliseconds; ``delays_ms[0]`` is level 1."""

    delays_ms: tuple[int, ...]

    @classmethod
    def parse(cls, text: str = DEFAULT_LEVELS) -> DelayLevels:
        entries = text.split()
        if not entries:
            raise ConfigError("messageDelayLevel is empty; expected e.g. '1s 5s 10s'")
        delays = []
        for position, entry in enumerate(entries, start=1):
            match = _ENTRY.match(entry)
            if match is None or int(match.group(1)) <= 0:
                raise ConfigError(
                    f"messageDelayLevel entry {position} is {entry!r}; expected a positive "
                    "number followed by s, m, h or d (e.g. '30s', '2h')"
                )
            delays.append(int(match.group(1)) * _UNITS_MS[match.group(2)])
        return cls(tuple(delays))

    @property
    def max_level(self) -> int:
        return len(self.delays_ms)

    def clamp(self, level: int) -> int:
        """The effective level: 0 for no delay, else ``min(level, max_level)``."""
        if level <= 0:
            return 0
        return min(level, self.max_level)

    def delay_ms(self, level: int) -> int:
        """The delay of an effective level (1..max_level)."""
        if not 1 <= level <= self.max_level:
            raise ConfigError(f"delay level {level} is outside 1..{self.max_level}")
        return self.delays_ms[level - 1]
