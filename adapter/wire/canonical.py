"""Proof that a record's bytes are its one canonical encoding, without a second copy.

Reproduces no RocketMQ behaviour: :mod:`adapter.wire.codec` re-encodes each decoded record
into a :class:`SameBytes`, which compares what is written with the bytes that were read, so a
multi-megabyte body is never copied.

Known gaps: none of its own.
"""

from __future__ import annotations

__all__ = ["SameBytes"]


class SameBytes:
    """A write-only stream that checks what is written against ``data`` instead of keeping it.

    Lets the codec confirm that a body is in canonical encoding without building
    a second copy of a possibly multi-megabyte record.
    """

    __slots__ = ("_data", "_pos", "same")

    def __init__(self, data: bytes, pos: int) -> None:
        self._data = data
        self._pos = pos
        self.same = True

    def write(self, chunk: bytes) -> int:
        if self.same and not self._data.startswith(chunk, self._pos):
            self.same = False
        self._pos += len(chunk)
        return len(chunk)

    def matched_all(self) -> bool:
        return self.same and self._pos == len(self._data)
