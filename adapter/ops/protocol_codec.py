"""Kafka's wire encoding as its flexible request versions use it: frames, headers, fields.

Not a RocketMQ behaviour: the few Kafka requests confluent-kafka cannot send
(:mod:`adapter.ops.share_protocol`) are encoded with these. Compact strings and arrays (length
+ 1 as an unsigned varint, 0 for null), fixed-width big-endian integers, UUIDs, and tagged
fields (written empty, skipped when read). Pure: bytes in and out.

Known gaps: only what flexible versions need; tagged fields are never written.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


class ProtocolError(ValueError):
    """A response that does not decode as its spec says."""


class Writer:
    """Kafka's flexible-version encoding: compact strings and arrays, empty tagged fields."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def raw(self, fmt: str, value: int) -> Writer:
        self._parts.append(struct.pack(fmt, value))
        return self

    def int8(self, value: int) -> Writer:
        return self.raw(">b", value)

    def int16(self, value: int) -> Writer:
        return self.raw(">h", value)

    def int32(self, value: int) -> Writer:
        return self.raw(">i", value)

    def int64(self, value: int) -> Writer:
        return self.raw(">q", value)

    def uvarint(self, value: int) -> Writer:
        out = bytearray()
        while value >= 0x80:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)
        self._parts.append(bytes(out))
        return self

    def string(self, value: str | None) -> Writer:
        """A compact (nullable) string: length + 1 as an unsigned varint, 0 for null."""
        if value is None:
            return self.uvarint(0)
        data = value.encode()
        self.uvarint(len(data) + 1)
        self._parts.append(data)
        return self

    def uuid(self, value: str) -> Writer:
        self._parts.append(uuid.UUID(value).bytes)
        return self

    def array(self, items: Sequence[T] | None, each: Callable[[Writer, T], object]) -> Writer:
        """A compact (nullable) array."""
        if items is None:
            return self.uvarint(0)
        self.uvarint(len(items) + 1)
        for item in items:
            each(self, item)
        return self

    def tags(self) -> Writer:
        return self.uvarint(0)

    def bytes(self) -> bytes:
        return b"".join(self._parts)


class Reader:
    def __init__(self, data: bytes) -> None:
        self._data = data
        self._at = 0

    def _take(self, n: int) -> bytes:
        if self._at + n > len(self._data):
            raise ProtocolError(f"response ends early: {n} bytes wanted at {self._at}")
        out = self._data[self._at : self._at + n]
        self._at += n
        return out

    def _fixed(self, fmt: str) -> int:
        value: int = struct.unpack(fmt, self._take(struct.calcsize(fmt)))[0]
        return value

    def int8(self) -> int:
        return self._fixed(">b")

    def int16(self) -> int:
        return self._fixed(">h")

    def int32(self) -> int:
        return self._fixed(">i")

    def int64(self) -> int:
        return self._fixed(">q")

    def uvarint(self) -> int:
        value, shift = 0, 0
        while True:
            byte = self._take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 63:
                raise ProtocolError("varint too long")

    def string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self._take(n - 1).decode()

    def text(self) -> str:
        return self.string() or ""

    def uuid(self) -> str:
        return str(uuid.UUID(bytes=self._take(16)))

    def array(self, each: Callable[[Reader], T]) -> list[T]:
        n = self.uvarint()
        return [each(self) for _ in range(max(n - 1, 0))]

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self._take(self.uvarint())


def request(api_key: int, version: int, correlation_id: int, client_id: str, body: bytes) -> bytes:
    """A whole request frame: size, header v2 (client id as a classic nullable string), body."""
    name = client_id.encode()
    header = struct.pack(">hhih", api_key, version, correlation_id, len(name)) + name + b"\x00"
    return struct.pack(">i", len(header) + len(body)) + header + body


def response(frame: bytes, *, header_tags: bool = True) -> tuple[int, Reader]:
    """The correlation id and a reader of the body: header v1, or v0 (``ApiVersions``'s, whose
    header has no tagged fields) when not ``header_tags``."""
    reader = Reader(frame)
    correlation_id = reader.int32()
    if header_tags:
        reader.tags()
    return correlation_id, reader
