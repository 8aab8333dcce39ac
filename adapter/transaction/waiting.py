"""Decisions read from END before the half message they name: held until it can be decided.

No RocketMQ counterpart: RocketMQ's broker answers END_TRANSACTION against a half message it
has already stored. Here HALF and END are two logs read side by side, so an END can be read
before its half message (HALF's leader moved, the coordinator is catching up). It waits; the
state decides it once the half message it names is read, or at once when it names an unread
copy of a message already pending (one send written twice, see
:mod:`adapter.transaction.state`).

How long one waits: an END the producer did not deliver itself is refused once it waited
``wait_ms`` for a half message beyond HALF's end (a decision with nothing to decide). A
*delivered* END (its message is out already, the fast path) is never refused for waiting
within the retention: refusing it would let a check deliver its message a second time. Only
one older than the retention, naming an offset HALF never reached, is refused (a forged
record, or a HALF log that lost records).

Known gaps: none of its own; waiting ENDs hold END's committed position, so after a crash
they are read again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from adapter.wire.records import EndTransaction

_Id = tuple[str, str]
"""A transaction id and its producer group."""


@dataclass(frozen=True, slots=True)
class Waiting:
    """An END read before the half message it names."""

    offset: int
    """The END record's own offset."""
    end: EndTransaction
    since_ms: int
    delivered: bool


class WaitingDecisions:
    """The waiting ENDs of one partition, by the half offset they name and by transaction."""

    def __init__(self) -> None:
        self._by_half: dict[int, list[Waiting]] = {}
        self._by_id: dict[_Id, set[int]] = {}
        """The half offsets that waiting ENDs of a transaction name."""

    def add(self, waiting: Waiting) -> None:
        end = waiting.end
        self._by_half.setdefault(end.half_offset, []).append(waiting)
        self._by_id.setdefault(_id_of(waiting), set()).add(end.half_offset)

    def take(self, half_offset: int) -> list[Waiting]:
        """The ENDs naming ``half_offset``, no longer waiting."""
        return self._remove(half_offset, lambda _: True)

    def take_for(self, transaction_id: str, group: str, after: int) -> list[Waiting]:
        """The ENDs of a transaction that name an offset beyond ``after``, no longer waiting,
        in the order they were read."""
        key = (transaction_id, group)
        offsets = sorted(o for o in self._by_id.get(key, ()) if o > after)
        taken = [w for o in offsets for w in self._remove(o, lambda w: _id_of(w) == key)]
        return sorted(taken, key=lambda w: w.offset)

    def expire(
        self, now_ms: int, half_end: int, wait_ms: int, delivered_wait_ms: int
    ) -> list[Waiting]:
        """The ENDs that waited too long for a half message beyond ``half_end`` (HALF's end,
        freshly read), no longer waiting: ``wait_ms``, or ``delivered_wait_ms`` for one whose
        message the producer delivered."""
        late = [o for o in self._by_half if o >= half_end]
        return [
            w
            for o in late
            for w in self._remove(o, lambda w: _overdue(w, now_ms, wait_ms, delivered_wait_ms))
        ]

    def overdue(self, now_ms: int, wait_ms: int, delivered_wait_ms: int) -> bool:
        """Whether any END waited long enough to be refused if HALF never reached it: only
        then is HALF's end worth a fresh read."""
        return any(
            _overdue(w, now_ms, wait_ms, delivered_wait_ms)
            for ends in self._by_half.values()
            for w in ends
        )

    def end_offsets(self) -> list[int]:
        return [w.offset for ends in self._by_half.values() for w in ends]

    def __len__(self) -> int:
        return sum(len(ends) for ends in self._by_half.values())

    def _remove(self, half_offset: int, chosen: Callable[[Waiting], bool]) -> list[Waiting]:
        ends = self._by_half.pop(half_offset, [])
        taken = [w for w in ends if chosen(w)]
        kept = [w for w in ends if not chosen(w)]
        if kept:
            self._by_half[half_offset] = kept
        for key in {_id_of(w) for w in taken} - {_id_of(w) for w in kept}:
            offsets = self._by_id[key]
            offsets.discard(half_offset)
            if not offsets:
                del self._by_id[key]
        return taken


def _id_of(waiting: Waiting) -> _Id:
    return (waiting.end.transaction_id, waiting.end.producer_group)


def _overdue(waiting: Waiting, now_ms: int, wait_ms: int, delivered_wait_ms: int) -> bool:
    limit = delivered_wait_ms if waiting.delivered else wait_ms
    return now_ms - waiting.since_ms >= limit
