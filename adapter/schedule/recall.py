"""Recalling a timer message: the handle, and who wins a recall racing a delivery (pure).

Reproduces RocketMQ 5.5's ``recallMessage``: a timer message's ``SendReceipt`` carries a recall
handle; recalling it before its deliver time means it is never delivered, and after delivery
the recall fails. RocketMQ decides by the broker's clock and can lose a race with its own
timing wheel; here the order of one Kafka log decides, so exactly one of the two wins:

- the recaller appends a RECALL record (key: message id) to ``RMQ_SYS_TIMER_RECALL``;
- the forwarder writes a DELIVERED marker for the same id in the transaction that delivers the
  timer, and commits only if no RECALL of that id lies before its marker;
- the recaller succeeds only if no committed DELIVERED marker lies before its RECALL.

A forwarder that meets a recalled timer drops it and writes a DROPPED marker. Markers are
tombstones of a compacted topic, so the log keeps only recalls that are still waiting.

Known gaps: the recaller looks for markers from :data:`SCAN_FROM_MS` before the deliver time
(markers are written at or after it by the forwarder's clock), so clocks must agree that well;
a recall more than :data:`RECALL_HORIZON_MS` after the deliver time is refused without looking.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from dataclasses import dataclass

from adapter.exceptions import AdapterError

KIND_HEADER = "rmq.recall"
RECALL = b"recall"
DELIVERED = b"delivered"
DROPPED = b"dropped"
SCAN_FROM_MS = 60_000
"""The recaller reads markers from this long before the deliver time."""
RECALL_HORIZON_MS = 12 * 3_600_000
"""Markers are kept at least a day (``delete.retention.ms``); a recall is refused this long
after the deliver time."""
_VERSION = "v1"


class BadRecallHandle(AdapterError):
    """A recall handle this adapter did not issue, or for another topic."""


@dataclass(frozen=True, slots=True)
class RecallHandle:
    """What a recall handle names: the topic, the message id and its deliver time."""

    topic: str
    message_id: str
    deliver_ms: int

    def encode(self) -> str:
        text = f"{_VERSION} {self.topic} {self.message_id} {self.deliver_ms}"
        return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, handle: str, topic: str) -> RecallHandle:
        """The handle's content; :class:`BadRecallHandle` if it is not one of ours or names
        another topic than ``topic``."""
        try:
            padded = handle + "=" * (-len(handle) % 4)
            version, named, message_id, deliver = (
                base64.urlsafe_b64decode(padded.encode()).decode().split(" ")
            )
            parsed = cls(named, message_id, int(deliver))
        except (ValueError, binascii.Error, UnicodeDecodeError, AttributeError):
            raise BadRecallHandle(f"recall handle {handle!r} is not valid") from None
        if version != _VERSION:
            raise BadRecallHandle(f"recall handle {handle!r} has an unknown version {version!r}")
        if parsed.topic != topic:
            raise BadRecallHandle(
                f"recall handle {handle!r} belongs to topic {parsed.topic!r}, not {topic!r}"
            )
        return parsed


@dataclass(frozen=True, slots=True)
class Marker:
    """A record of ``RMQ_SYS_TIMER_RECALL``: its offset, message id and kind."""

    offset: int
    message_id: str
    kind: bytes


def delivered_before(markers: Iterable[Marker], message_id: str, recall_offset: int) -> bool:
    """The recaller's verdict: a committed DELIVERED marker of ``message_id`` lies before its
    RECALL at ``recall_offset`` (the recall lost). ``markers`` are read read_committed."""
    return any(
        m.kind == DELIVERED and m.message_id == message_id and m.offset < recall_offset
        for m in markers
    )


def recalled_before(recalls: dict[str, int], message_id: str, marker_offset: int) -> bool:
    """The forwarder's verdict: a RECALL of ``message_id`` lies before its DELIVERED marker at
    ``marker_offset`` (the delivery must not commit). ``recalls`` maps ids to the offset of
    their first RECALL."""
    offset = recalls.get(message_id)
    return offset is not None and offset < marker_offset
