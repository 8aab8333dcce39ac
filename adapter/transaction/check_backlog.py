"""Which check requests a producer need not pass to its checker: superseded and answered ones.

The coordinator asks about a pending half message once per check interval, whether or not
anyone answers. While no producer of the group is alive, its check topic piles up one request
per half per interval, and the first producer to start would call its ``checker_callback``
for every one of them: 12 rounds of 32 pending halves made 384 calls for 32 answers. RocketMQ's
broker never builds that backlog (it sends a check to a live channel or not at all), so an
application has never seen such a burst.

Two rules keep the calls to one per half and round, and both only skip work that an answer
already covers (the coordinator keeps asking about a half until it is decided, so a skipped
request can delay nothing beyond the next check):

- **superseded**: of the requests read together, only each half's last one is answered; the
  earlier ones ask the same question, older;
- **answered**: a half this producer decided (COMMIT or ROLLBACK, acknowledged on END) is never
  passed to the checker again; one it answered UNKNOWN is passed again only for a later check
  than the one answered. The memory is bounded (:data:`REMEMBERED`), oldest forgotten first: a
  forgotten half costs one more call, never a wrong answer.

Pure: no Kafka, no clock. :class:`adapter.transaction.checks.CheckResponder` is the shell.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import TypeVar

from adapter.wire.records import CheckRequest

REMEMBERED = 100_000
"""Halves whose answer a producer remembers (about 100 bytes each)."""

Position = TypeVar("Position")
HalfAt = tuple[int, int]


def half_of(request: CheckRequest) -> HalfAt:
    """The half message a request asks about: its HALF partition and offset."""
    return request.half_partition, request.half_offset


def superseded(asked: Sequence[tuple[Position, CheckRequest]]) -> set[int]:
    """The indexes into ``asked`` (read in order) of requests a later one about the same half
    replaces."""
    last: dict[HalfAt, int] = {}
    replaced: set[int] = set()
    for index, (_position, request) in enumerate(asked):
        earlier = last.get(half_of(request))
        if earlier is not None:
            replaced.add(earlier)
        last[half_of(request)] = index
    return replaced


class AnsweredChecks:
    """The last answer this producer gave about each half, bounded to ``capacity`` halves."""

    def __init__(self, capacity: int = REMEMBERED) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self._capacity = capacity
        self._answers: OrderedDict[HalfAt, tuple[int, bool]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._answers)

    def needs_answer(self, request: CheckRequest) -> bool:
        """Whether ``request`` asks something this producer has not answered yet."""
        answered = self._answers.get(half_of(request))
        if answered is None:
            return True
        check_times, decided = answered
        return not decided and request.check_times > check_times

    def remember(self, request: CheckRequest, *, decided: bool) -> None:
        """Note the answer to ``request``: a decision (acknowledged on END) or UNKNOWN."""
        half = half_of(request)
        earlier = self._answers.pop(half, None)
        if earlier is not None:
            decided = decided or earlier[1]
        self._answers[half] = (request.check_times, decided)
        while len(self._answers) > self._capacity:
            self._answers.popitem(last=False)
