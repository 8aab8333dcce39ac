"""Recalling a timer message: the handle, and who wins a recall racing a delivery (pure).

Reproduces RocketMQ 5.5's ``recallMessage``: a timer message's ``SendReceipt`` carries a recall
handle; recalling it before its deliver time means it is never delivered, and after delivery
the recall fails. RocketMQ decides by the broker's clock and can lose a race with its own
timing wheel; here the order of one Kafka log decides, so exactly one of the two wins:

- the recaller appends a RECALL record (key: message id) to ``RMQ_SYS_TIMER_RECALL``;
- the forwarder writes a DELIVERED marker for the same id in the transaction that delivers the
  timer, and commits only if no RECALL of that id lies before its marker;
- the recaller succeeds only if no committed DELIVERED marker lies before its RECALL.

Before it writes, the recaller reads the log as it is (:func:`seen_before`): a delivered timer
is refused, and a timer recalled already is reported recalled, without a record. A forwarder
that meets a recalled timer drops it and writes a DROPPED marker. Markers are tombstones of a
compacted topic, so the log keeps only recalls that are still waiting; compaction keeps the
last record of each id, so a recaller whose RECALL lost writes DELIVERED again
(:data:`LOST_RECALL_MARK`): a later recall still finds the delivery, and is refused.

A handle is sealed (:meth:`RecallHandle.encode`): a keyed hash, keyed by the Kafka cluster's
id, of its topic, message id and deliver time, so an altered handle (another topic, another
message, another deliver time) or one issued on another cluster is refused with the reason
before anything is written. The seal guards against mistakes, not against a principal who may
write the recall topic: such a principal can append a RECALL of any id anyway (ACLs:
docs/production.md).

Known gaps: the recaller looks for markers from :data:`SCAN_FROM_MS` before the deliver time
(markers are written at or after it by the forwarder's clock), so clocks must agree that well;
a recall more than :data:`RECALL_HORIZON_MS` after the deliver time is refused without looking.
Handles issued before handles were sealed (``v1``) are refused. A recaller that dies between
losing and writing the delivery again leaves its RECALL last under the id: once compaction
removed the DELIVERED marker, a later recall of that delivered timer reports success. Such
losses are rare: a recall after delivery is refused by the first read, without a record.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

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
LOST_RECALL_MARK = DELIVERED
"""What a recaller whose RECALL lost writes under the message id: compaction keeps the last
record of a key, so the delivery stays on record, not the recall that lost."""
_VERSION = "v2"
_SEAL_BYTES = 12


class BadRecallHandle(AdapterError):
    """A recall handle this adapter did not issue, altered, from another cluster, or for
    another topic."""


@dataclass(frozen=True, slots=True)
class RecallHandle:
    """What a recall handle names: the topic, the message id and its deliver time."""

    topic: str
    message_id: str
    deliver_ms: int

    def encode(self, cluster_id: str) -> str:
        """The handle, sealed for the Kafka cluster ``cluster_id``."""
        text = self._text()
        seal = _seal(cluster_id, text)
        return base64.urlsafe_b64encode(f"{text} {seal}".encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, handle: str, topic: str, cluster_id: str) -> RecallHandle:
        """The handle's content; :class:`BadRecallHandle` if it is not one of ours, names
        another topic than ``topic``, was altered, or was issued on another cluster than
        ``cluster_id``."""
        try:
            padded = handle + "=" * (-len(handle) % 4)
            fields = base64.urlsafe_b64decode(padded.encode()).decode().split(" ")
        except (ValueError, binascii.Error, UnicodeDecodeError, AttributeError):
            raise BadRecallHandle(f"recall handle {handle!r} is not valid") from None
        if fields[0] == "v1" and len(fields) == 4:
            raise BadRecallHandle(
                f"recall handle {handle!r} was issued before handles were sealed (v1): this "
                "release cannot verify it"
            )
        try:
            version, named, message_id, deliver, seal = fields
            parsed = cls(named, message_id, int(deliver))
        except ValueError:
            raise BadRecallHandle(f"recall handle {handle!r} is not valid") from None
        if version != _VERSION:
            raise BadRecallHandle(f"recall handle {handle!r} is not valid")
        if parsed.topic != topic:
            raise BadRecallHandle(
                f"recall handle {handle!r} belongs to topic {parsed.topic!r}, not {topic!r}"
            )
        if not hmac.compare_digest(seal.encode(), _seal(cluster_id, parsed._text()).encode()):
            raise BadRecallHandle(
                f"recall handle {handle!r} was not issued by this Kafka cluster "
                f"({cluster_id}) for topic {topic!r}, message {message_id} and deliver time "
                f"{deliver}: it was altered, or comes from another cluster"
            )
        return parsed

    def _text(self) -> str:
        return f"{_VERSION} {self.topic} {self.message_id} {self.deliver_ms}"


def _seal(cluster_id: str, text: str) -> str:
    digest = hmac.new(cluster_id.encode(), text.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest[:_SEAL_BYTES]).decode()


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


class Seen(Enum):
    """What the recall log says of a message before a recaller writes its RECALL."""

    NOTHING = "nothing"
    """No marker: write a RECALL and see who wins."""
    DELIVERED = "delivered"
    """A committed DELIVERED marker: the recall is refused, nothing written."""
    RECALLED = "recalled"
    """A RECALL, or the DROPPED marker of a recalled timer, and no delivery: recalled already."""


def seen_before(markers: Iterable[Marker], message_id: str) -> Seen:
    """The recaller's verdict on the committed log before it writes (a DELIVERED marker after a
    RECALL of the same id never commits, so a delivery seen anywhere wins)."""
    kinds = {m.kind for m in markers if m.message_id == message_id}
    if DELIVERED in kinds:
        return Seen.DELIVERED
    if kinds & {RECALL, DROPPED}:
        return Seen.RECALLED
    return Seen.NOTHING


def recalled_before(recalls: dict[str, int], message_id: str, marker_offset: int) -> bool:
    """The forwarder's verdict: a RECALL of ``message_id`` lies before its DELIVERED marker at
    ``marker_offset`` (the delivery must not commit). ``recalls`` maps ids to the offset of
    their first RECALL."""
    offset = recalls.get(message_id)
    return offset is not None and offset < marker_offset
