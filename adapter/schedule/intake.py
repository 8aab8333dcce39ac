"""How the forwarder reads one SCHEDULE record: when it is due, and what it holds (pure).

Reproduces the read side of ``ScheduleMessageService``: a record of a level is due at its
store time + the level's delay (:mod:`adapter.schedule.due`); a timer record (RocketMQ 5's
``delivery_timestamp``, headers ``TIMER_DELIVER_MS``, ``rmq.hop_due``, ``UNIQ_KEY``) at the end
of its hop (:mod:`adapter.schedule.timer`). Beyond RocketMQ, any application that may write
SCHEDULE can write any headers there, so nothing in them is trusted:

- the store time is the broker's LogAppendTime only; a record stamped otherwise (a SCHEDULE
  topic made by hand with CreateTime, whose stamp the writer chooses) counts its delay from
  the moment it is read, so no client-chosen time makes it due early;
- timer headers that are null, repeated with two values, not numbers, not UTF-8, or a deliver
  time more than :data:`FAR_AHEAD_MS` away (it would hop every 2 h for ever) make the record
  parked with the reason, like any other record that can never be delivered;
- a record the forwarder set aside for its missing topic (:mod:`adapter.schedule.aside`) is
  due at the end of its hop, and carries since when it waits; unreadable, these are ignored;
- with the schedule grants (:mod:`adapter.schedule.grants`), a record not signed by a granted
  application is parked at once, with reason ``refused destination``.

Known gaps: none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from confluent_kafka import TIMESTAMP_LOG_APPEND_TIME

from adapter import properties as prop
from adapter.hops import HopTable
from adapter.schedule import timer
from adapter.schedule.aside import SINCE_HEADER
from adapter.schedule.due import level_due_ms
from adapter.schedule.grants import ScheduleGrants, Unsigned
from adapter.schedule.held import Parked
from adapter.schedule.signing import SIGNATURE_HEADER, SIGNER_HEADER, SignedHeaders

HeaderValue = str | bytes | None
Headers = Sequence[tuple[str, HeaderValue]] | Mapping[str, HeaderValue] | None

_MS = re.compile(r"-?[0-9]{1,18}")

FAR_AHEAD_MS = timer.MAX_TIMER_MS + 86_400_000
"""The farthest a timer's deliver time may lie ahead when read: the 40 days a producer
allows, and a day for the clocks of producers and forwarders to disagree."""


@dataclass(frozen=True, slots=True)
class Read:
    """A record read: when it is due, what is held until then, and why it is parked (when)."""

    due_ms: int
    item: Parked
    reason: str | None = None
    """Set: the record can never be delivered, and is parked when due (at once)."""
    ahead_ms: int = 0
    """How far the broker's store stamp lay ahead of the forwarder's clock."""


class _Unreadable(ValueError):
    """A header of the record is not what the adapter writes."""


def read_record(
    partition: int,
    headers: Headers,
    value: bytes,
    timestamp: tuple[int, int],
    now_ms: int,
    hops: HopTable,
    grants: ScheduleGrants | None = None,
) -> Read:
    """The record at ``partition`` with ``headers``, ``value`` and ``timestamp`` (confluent's
    ``(type, ms)``), read at ``now_ms`` on the forwarder's clock; with ``grants``, only a
    record signed by a granted application is taken."""
    kind, stamp = timestamp
    store_ms = stamp if kind == TIMESTAMP_LOG_APPEND_TIME else now_ms
    ahead = max(0, store_ms - now_ms)
    found = _by_name(headers)
    since = _optional_number(found, SINCE_HEADER)
    signer_raw, sig = _optional_raw(found, SIGNER_HEADER), _optional_raw(found, SIGNATURE_HEADER)
    signed: SignedHeaders = ()
    if signer_raw is not None and sig is not None:
        signed = ((SIGNER_HEADER, signer_raw), (SIGNATURE_HEADER, sig))
    signer = None
    if grants is not None:
        try:
            signer = grants.signer_of(signer_raw, sig, value)
        except Unsigned as exc:
            return Read(now_ms, Parked(value), f"refused destination: {exc}", ahead)
    try:
        fields = _timer_fields(found)
    except _Unreadable as exc:
        return Read(now_ms, Parked(value), f"corrupt: timer headers ({exc})", ahead)
    if fields is None:  # a delayed message of a level, or one set aside (with its hop's end)
        hop_due = _optional_number(found, timer.HOP_DUE_HEADER)
        if hop_due is None:
            due = level_due_ms(store_ms, hops.delay_ms(partition), now_ms)
        else:
            due = timer.hop_due_ms(hop_due, now_ms, partition, hops)
        return Read(due, Parked(value, None, None, since, signer, signed), None, ahead)
    deliver_ms, hop_due, message_id = fields
    if deliver_ms - now_ms > FAR_AHEAD_MS:
        days = (deliver_ms - now_ms) / 86_400_000
        why = f"corrupt: timer deliver time {deliver_ms} is {days:.0f} days ahead"
        return Read(now_ms, Parked(value), f"{why}; at most {FAR_AHEAD_MS // 86_400_000}", ahead)
    due = timer.hop_due_ms(hop_due, now_ms, partition, hops)
    return Read(due, Parked(value, message_id, deliver_ms, since, signer, signed), None, ahead)


def unreadable(value: bytes, now_ms: int, exc: BaseException) -> Read:
    """A record whose reading failed unexpectedly: parked at once with the cause."""
    return Read(now_ms, Parked(value), f"corrupt: unreadable ({type(exc).__name__}: {exc})")


_TWICE = object()
"""A header given twice with two values."""


def _by_name(headers: Headers) -> dict[str, object]:
    found: dict[str, object] = {}
    pairs = headers.items() if isinstance(headers, Mapping) else headers or ()
    for key, value in pairs:
        found[key] = _TWICE if key in found and found[key] != value else value
    return found


def _optional_number(found: dict[str, object], name: str) -> int | None:
    """A header the adapter's own copies carry: its number, or None when absent or not one."""
    try:
        return _number(found, name) if name in found else None
    except _Unreadable:
        return None


def _optional_raw(found: dict[str, object], name: str) -> bytes | None:
    """A header's bytes; None when absent, null, given twice or not bytes."""
    try:
        return _raw(found, name) if name in found else None
    except _Unreadable:
        return None


def _timer_fields(found: dict[str, object]) -> tuple[int, int, str] | None:
    """A timer's deliver time, hop end and id; None for a record with no timer header."""
    if timer.DELIVER_HEADER not in found:
        return None
    deliver = _number(found, timer.DELIVER_HEADER)
    hop_due = _number(found, timer.HOP_DUE_HEADER)
    return deliver, hop_due, _text(found, prop.UNIQ_KEY)


def _raw(found: dict[str, object], name: str) -> bytes:
    if name not in found:
        raise _Unreadable(f"{name} missing")
    value = found[name]
    if value is None:
        raise _Unreadable(f"{name} is null")
    if value is _TWICE:
        raise _Unreadable(f"{name} given twice")
    if isinstance(value, str):
        return value.encode()
    if not isinstance(value, bytes):
        raise _Unreadable(f"{name} is not bytes: {type(value).__name__}")
    return value


def _number(found: dict[str, object], name: str) -> int:
    raw = _raw(found, name)
    text = raw.decode("ascii", "replace").strip()
    if not _MS.fullmatch(text):
        raise _Unreadable(f"{name} is not a time in ms: {raw[:40]!r}")
    return int(text)


def _text(found: dict[str, object], name: str) -> str:
    raw = _raw(found, name)
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        raise _Unreadable(f"{name} is not UTF-8: {raw[:40]!r}") from None
    if not text:
        raise _Unreadable(f"{name} is empty")
    return text
