"""Records a worker's consumer delivers a second time: skipped, and reported once a turn.

Not a RocketMQ behaviour: RocketMQ's broker reads its own commit log by offset. A Kafka consumer
whose position goes back (a reset after a leader change) delivers records again that the worker
has read already and whose effects it holds; the worker skips them and notes them here, and
:meth:`Rereads.report` logs one warning per partition for the turn.

Known gaps: none.
"""

from __future__ import annotations

import logging


class Rereads:
    """Records delivered again since the last report: where -> (first offset, count)."""

    def __init__(self, log: logging.Logger) -> None:
        self._log = log
        self._seen: dict[str, tuple[int, int]] = {}

    def note(self, where: str, offset: int) -> None:
        first, count = self._seen.get(where, (offset, 0))
        self._seen[where] = (min(first, offset), count + 1)

    def report(self) -> None:
        for where, (first, count) in sorted(self._seen.items()):
            self._log.warning(
                "the consumer delivered %d records of %s again, from offset %d (its position "
                "went back); they were read before and are skipped",
                count,
                where,
                first,
            )
        self._seen.clear()
