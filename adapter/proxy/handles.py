"""What names a transactional message across proxies: its transaction handle and birth.

RocketMQ's proxy hands the client a transaction id that locates the half message in the
broker's store, and the client gives it back with its decision (``EndTransaction``) or with
its answer to a check. Here the handle locates the half message in Kafka: HALF partition and
offset, and for a check the check's number, so that any proxy can write the decision's END
record without having seen the send. The message's own id (the client's, its ``UNIQ_KEY``) is
the transaction id the coordinator matches the decision against, so a forged or stale handle
is refused there, never applied to another message.

A client that gets no answer to a transactional send (its proxy died) sends the message again,
through another proxy, with the same message id. The coordinator takes two half messages for one
when transaction id, producer group and copy stamp match and they share a HALF partition. So the
proxy gives a half message a copy stamp (``COPY_STAMP``) that every retry computes alike: the
second the client made the message id in (5.x ids, version 01, carry it), if it is within
:data:`BORN_WINDOW_MS` of now; otherwise now. Its HALF partition is chosen by the client id.
Its born time stays the proxy's now, to the millisecond: the check-back and the fast path's
window count from it, never from when the application built the message.

Known gaps: a client whose clock is off by more than the window (or whose ids are not 5.x's)
gets its stamp from the proxy's clock, and a retry through another proxy can then be committed
twice by the check-back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from adapter.proxy.codes import Code, ProxyError

__all__ = ["BORN_WINDOW_MS", "TransactionHandle", "id_time_ms", "stable_born_ms"]

_HANDLE = re.compile(r"^(\d{1,9}):(\d{1,19})(?::(\d{1,9}))?$")
ID_EPOCH_S = 1_609_459_200
"""2021-01-01T00:00:00Z: 5.x message ids count seconds from it."""
BORN_WINDOW_MS = (10_000, 1_000)
"""How far behind and ahead of now a message id's time may be to serve as born time."""


@dataclass(frozen=True, slots=True)
class TransactionHandle:
    half_partition: int
    half_offset: int
    check_times: int = 0
    """Which check this answers; 0 for the handle of a send."""

    def encode(self) -> str:
        text = f"{self.half_partition}:{self.half_offset}"
        return f"{text}:{self.check_times}" if self.check_times else text

    @classmethod
    def decode(cls, text: str) -> TransactionHandle:
        """``INVALID_TRANSACTION_ID`` for anything this proxy did not hand out."""
        match = _HANDLE.match(text)
        if match is None:
            raise ProxyError(
                Code.INVALID_TRANSACTION_ID, f"transaction id {text[:80]!r} is not valid"
            )
        partition, offset, checks = match.groups()
        return cls(int(partition), int(offset), int(checks or 0))


def id_time_ms(message_id: str) -> int | None:
    """When a 5.x message id (version 01, 34 hex digits) was made, to the second."""
    if len(message_id) != 34 or not message_id.startswith("01"):
        return None
    try:
        seconds = int(message_id[18:26], 16)
    except ValueError:
        return None
    return (ID_EPOCH_S + seconds) * 1000


def stable_born_ms(message_id: str, now_ms: int) -> int:
    """The copy stamp of a half message: the same for every send of one message, if it can."""
    made = id_time_ms(message_id)
    behind, ahead = BORN_WINDOW_MS
    if made is None or not now_ms - behind <= made <= now_ms + ahead:
        return now_ms
    return made
