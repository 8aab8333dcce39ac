"""What a FIFO consumer leaves for the next owner of a partition, in its commit's metadata.

Reproduces RocketMQ's broker-side FIFO state across consumers: there, acks, attempts and
invisible durations live in the broker, so a queue that moves to another consumer neither
redelivers what was acked nor restarts attempts nor shows a held message early. Kafka keeps
one position per partition, so the FIFO book writes the rest into the commit's metadata
string (Kafka keeps up to ``offset.metadata.max.bytes``, 4096 by default): the offsets past
the position already done, and for each record not done the attempts it has used and, if it
is held, until when (epoch ms). Offsets are relative to the committed position.

Format: ``f1|<done>|<states>``; ``<done>`` is comma-separated offsets or ``a-b`` runs;
``<states>`` is comma-separated ``offset=used`` or ``offset=used@until_ms``.

Known gaps: a note longer than :data:`MAX_CHARS` loses its last items (those records are
then delivered again, or start their attempts again); a note that does not parse is ignored.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["MAX_CHARS", "Carried", "decode", "encode"]

MAX_CHARS = 3000
"""The longest note written (under Kafka's default 4096-byte metadata limit)."""
_VERSION = "f1"


@dataclass(frozen=True, slots=True)
class Carried:
    """What a note says, with absolute offsets."""

    done: frozenset[int] = frozenset()
    used: dict[int, tuple[int, int | None]] = field(default_factory=dict)
    """Offset -> (attempts used, held until epoch ms or ``None``)."""


def encode(base: int, done: Iterable[int], states: Iterable[tuple[int, int, int | None]]) -> str:
    """The note for a partition committed at ``base``: ``done`` offsets past it, and
    ``(offset, attempts used, held until ms)`` of records not done (empty when nothing to
    say)."""
    runs: list[str] = []
    for offset in sorted(o - base for o in done if o >= base):
        if runs and _end(runs[-1]) == offset - 1:
            runs[-1] = f"{runs[-1].partition('-')[0]}-{offset}"
        else:
            runs.append(str(offset))
    items = [
        f"{o - base}={used}" + (f"@{until}" if until is not None else "")
        for o, used, until in sorted(states)
        if o >= base
    ]
    if not runs and not items:
        return ""
    note = f"{_VERSION}|{','.join(runs)}|{','.join(items)}"
    while len(note) > MAX_CHARS and (runs or items):
        (items if items else runs).pop()
        note = f"{_VERSION}|{','.join(runs)}|{','.join(items)}"
    return note


def decode(base: int, note: str | None) -> Carried:
    """What ``note`` (committed at ``base``) says; empty when it is not a FIFO note."""
    if not note or not note.startswith(f"{_VERSION}|"):
        return Carried()
    try:
        _version, done_part, states_part = note.split("|")
        done: set[int] = set()
        for run in filter(None, done_part.split(",")):
            first, _dash, last = run.partition("-")
            done.update(range(base + int(first), base + int(last or first) + 1))
        used: dict[int, tuple[int, int | None]] = {}
        for item in filter(None, states_part.split(",")):
            offset, _eq, rest = item.partition("=")
            count, _at, until = rest.partition("@")
            used[base + int(offset)] = (int(count), int(until) if until else None)
    except ValueError:
        return Carried()
    return Carried(frozenset(done), used)


def _end(run: str) -> int:
    return int(run.rpartition("-")[2])
