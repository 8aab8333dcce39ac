"""A consumer group's dead letters as an operator sees them, and the copy a resend writes.

Plays the part of rocketmq-dashboard's DLQ page. Pure: :mod:`adapter.ops.dead_letters` reads
``%DLQ%<group>`` and writes the copies. A dead letter (written by
:func:`adapter.consumer.send_back.dead_letter_record`) carries the message's id
(``UNIQ_KEY``), its original topic (``RETRY_TOPIC``), its reconsume times and, as
``rmq.dlq_reason``, why it is there; every other header is the message's own, as bytes.

A resend writes the message to the group's retry topic ``%RETRY%<group>``: the group that
failed it consumes it again, and no other group subscribed to the original topic sees it a
second time (RocketMQ's dashboard resends to one group too, through its consumers). The copy
starts its retries afresh (``RECONSUME_TIME`` 0), so a failure takes it through the group's
whole retry policy before it comes back to the dead letters. It keeps the message's id, so a
copy is recognisable, and ``rmq.dlq_resent_from`` names the dead letter it came from.

Known gaps: none.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass

from adapter import properties as prop
from adapter.consumer.send_back import DLQ_REASON
from adapter.kafka.reading import first_header

RESENT_FROM = "rmq.dlq_resent_from"
"""The header of a resent copy naming its dead letter: ``%DLQ%<group>@<offset>``."""


@dataclass(frozen=True, slots=True)
class DeadLetter:
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    body: bytes
    headers: tuple[tuple[str, bytes | None], ...]

    def header(self, name: str) -> str | None:
        return first_header(self.headers, name)

    @property
    def msg_id(self) -> str:
        return self.header(prop.UNIQ_KEY) or f"(no id)@{self.offset}"

    @property
    def topic(self) -> str:
        """The topic the message was sent to."""
        return self.header(prop.RETRY_TOPIC) or "-"

    @property
    def reason(self) -> str:
        return self.header(DLQ_REASON) or "-"

    @property
    def reconsume_times(self) -> str:
        return self.header(prop.RECONSUME_TIME) or "0"

    @property
    def place(self) -> str:
        return f"{self.partition}@{self.offset}"


def resent_copy(letter: DeadLetter, dlq_topic: str) -> list[tuple[str, str | bytes | None]]:
    """The headers of the copy a resend writes to the retry topic."""
    headers: list[tuple[str, str | bytes | None]] = [
        (name, value)
        for name, value in letter.headers
        if value is not None and name not in (DLQ_REASON, prop.RECONSUME_TIME, RESENT_FROM)
    ]
    headers.append((prop.RECONSUME_TIME, b"0"))
    headers.append((RESENT_FROM, f"{dlq_topic}@{letter.offset}".encode()))
    return headers


def marker_key(group: str, letter: DeadLetter) -> bytes:
    """The key of the record that says this dead letter was resent (one per dead letter)."""
    return f"{group}|{letter.partition}@{letter.offset}".encode()


def selected(
    letters: Sequence[DeadLetter],
    msg_ids: Sequence[str],
    begin_ms: int | None,
    end_ms: int | None,
) -> list[DeadLetter]:
    """The dead letters with one of ``msg_ids`` (all when none is given), stored within
    [``begin_ms``, ``end_ms``) when given."""
    wanted = set(msg_ids)
    return [
        letter
        for letter in letters
        if (not wanted or letter.msg_id in wanted)
        and (begin_ms is None or letter.timestamp_ms >= begin_ms)
        and (end_ms is None or letter.timestamp_ms < end_ms)
    ]


def _text(value: bytes | None) -> dict[str, str] | str | None:
    if value is None:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(value).decode("ascii")}


def export_line(group: str, letter: DeadLetter) -> str:
    """One JSON line: the dead letter's place, time, id, headers (text, or base64 where not
    UTF-8) and body (base64)."""
    return json.dumps(
        {
            "group": group,
            "partition": letter.partition,
            "offset": letter.offset,
            "timestamp_ms": letter.timestamp_ms,
            "msg_id": letter.msg_id,
            "topic": letter.topic,
            "reason": letter.reason,
            "key": None if letter.key is None else base64.b64encode(letter.key).decode("ascii"),
            "headers": [[name, _text(value)] for name, value in letter.headers],
            "body_base64": base64.b64encode(letter.body).decode("ascii"),
        },
        sort_keys=False,
    )


def preview(body: bytes, limit: int = 200) -> str:
    """The body as text when it is UTF-8, else its first bytes in hex."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return f"({len(body)} bytes) {body[: limit // 2].hex()}"
    return text if len(text) <= limit else text[:limit] + f"... ({len(body)} bytes)"
