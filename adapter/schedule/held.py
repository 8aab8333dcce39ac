"""What the forwarder holds and what it produces for it: a held record, and one send (pure data).

Reproduces nothing by itself: the values :mod:`adapter.schedule.plan` decides with, apart so
that the planners of special cases (:mod:`adapter.schedule.aside`) share them.

Known gaps: none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from adapter import properties as prop
from adapter.exceptions import AdapterError
from adapter.kafka import writing
from adapter.schedule.head_of_line import Entry
from adapter.schedule.signing import SignedHeaders
from adapter.wire import codec
from adapter.wire.records import ScheduledMessage


@dataclass(frozen=True, slots=True)
class Parked:
    """A SCHEDULE record held until due: its value, and for a timer its id and deliver time."""

    value: bytes
    message_id: str | None = None
    deliver_ms: int | None = None
    missing_since_ms: int | None = None
    """Set aside for its missing topic since then (:mod:`adapter.schedule.aside`)."""
    signer: str | None = None
    """The application that signed it, verified by the grants (:mod:`.grants`); else None."""
    signed: SignedHeaders = ()
    """Its signing headers, carried to its hops and copies (:mod:`.signing`)."""


SendKind = Literal["deliver", "park", "hop", "aside", "delivered", "dropped"]

Held = Entry[Parked]
"""A SCHEDULE record held until due: its partition, offset, due time and content."""


@dataclass(frozen=True, slots=True)
class Send:
    """One record a batch produces for ``entry``: its delivery (``kind`` "deliver"), its
    parking in the poison topic with ``reason`` ("park"), its next hop ("hop"), its retry while
    its topic is missing ("aside"), or a marker in the recall topic ("delivered" or
    "dropped")."""

    entry: Held
    kind: SendKind
    topic: str
    value: bytes | None
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    partition: int | None = None
    key: bytes | None = None
    reason: str | None = None

    def produce_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of ``produce`` beyond topic and value."""
        return writing.produce_kwargs(self.headers, self.partition, self.key)


def message_id_of(send: Send) -> str:
    """The id of the message ``send`` is for, for log lines: a timer's, else the ``UNIQ_KEY``
    the send carries or its SCHEDULE record names; ``?`` for a record that names none."""
    if send.entry.item.message_id is not None:
        return send.entry.item.message_id
    for name, value in send.headers:
        if name == prop.UNIQ_KEY:
            return value.decode("utf-8", errors="replace")
    try:
        record = codec.decode(send.entry.item.value)
    except AdapterError:
        return "?"
    return record.unique_key if isinstance(record, ScheduledMessage) else "?"
