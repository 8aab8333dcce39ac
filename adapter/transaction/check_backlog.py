"""Which check requests a producer need not pass to its checker: superseded, or already decided.

The coordinator asks about a pending half message once per check interval, whether or not
anyone answers. While no producer of the group is alive, its check topic piles up one request
per half per interval, and the first producer to start would call its ``checker_callback``
for every one of them: 12 rounds of 32 pending halves made 384 calls for 32 answers. RocketMQ's
broker never builds that backlog (it sends a check to a live channel or not at all), so an
application has never seen such a burst.

Two rules bring such a backlog down to one call per half, and both only skip work that an
answer already covers (the coordinator keeps asking about a half until it is decided, so a
skipped request can delay nothing beyond the next check):

- **superseded**: of the requests read together, only each half's last one is answered; the
  earlier ones ask the same question, older;
- **decided**: a half this producer decided (COMMIT or ROLLBACK, acknowledged on END) is not
  passed to the checker again. The memory is bounded (:data:`REMEMBERED`), oldest forgotten
  first: a forgotten half costs one more call, never a wrong answer. A half answered UNKNOWN is
  not remembered: the next check asks the checker again, whatever number the coordinator
  gives it.

Pure: no Kafka, no clock. :class:`adapter.transaction.checks.CheckResponder` is the shell.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from adapter.wire.records import CheckRequest

REMEMBERED = 100_000
"""Decided halves a producer remembers (about 150 bytes each)."""

HalfAt = tuple[int, int, str]


def half_of(request: CheckRequest) -> HalfAt:
    """The half message a request asks about: its HALF partition and offset, and its id (a
    HALF topic made again reuses offsets)."""
    return request.half_partition, request.half_offset, request.transaction_id


def superseded(asked: Sequence[CheckRequest]) -> set[int]:
    """The indexes into ``asked`` (read in order) of requests a later one about the same half
    replaces."""
    last: dict[HalfAt, int] = {}
    replaced: set[int] = set()
    for index, request in enumerate(asked):
        earlier = last.get(half := half_of(request))
        if earlier is not None:
            replaced.add(earlier)
        last[half] = index
    return replaced


class DecidedHalves:
    """The halves this producer decided, bounded to ``capacity``, oldest forgotten first."""

    def __init__(self, capacity: int = REMEMBERED) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self._capacity = capacity
        self._halves: OrderedDict[HalfAt, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._halves)

    def needs_answer(self, request: CheckRequest) -> bool:
        """Whether ``request`` asks about a half this producer has not decided."""
        return half_of(request) not in self._halves

    def remember(self, request: CheckRequest) -> None:
        """Note that the half of ``request`` was decided (the decision acknowledged on END)."""
        self._halves[half_of(request)] = None
        while len(self._halves) > self._capacity:
            self._halves.popitem(last=False)
