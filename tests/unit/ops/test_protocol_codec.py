"""Kafka's flexible-version encoding, byte for byte as the protocol guide lays it out."""

from __future__ import annotations

import pytest

from adapter.ops.protocol_codec import ProtocolError, Reader, Writer, request, response

pytestmark = pytest.mark.timeout(10)


def test_compact_strings_and_arrays_carry_their_length_plus_one_and_null_is_zero() -> None:
    written = Writer().string("share").string(None).array([1, 2], Writer.int32).tags().bytes()
    assert written == b"\x06share" + b"\x00" + b"\x03" + b"\0\0\0\x01\0\0\0\x02" + b"\x00"
    reader = Reader(written)
    assert (reader.string(), reader.string(), reader.array(Reader.int32)) == ("share", None, [1, 2])


def test_a_varint_takes_seven_bits_a_byte_low_bits_first() -> None:
    assert Writer().uvarint(300).bytes() == b"\xac\x02"
    assert Reader(b"\xac\x02").uvarint() == 300


def test_tagged_fields_a_reader_does_not_know_are_skipped() -> None:
    # two tagged fields: tag 0 with 2 bytes, tag 5 with 1 byte; then an int16
    reader = Reader(b"\x02" + b"\x00\x02ab" + b"\x05\x01c" + b"\x00\x07")
    reader.tags()
    assert reader.int16() == 7


def test_a_request_frame_is_its_size_then_header_v2_then_the_body() -> None:
    frame = request(90, 1, 7, "me", b"BODY")
    header = b"\x00\x5a" + b"\x00\x01" + b"\x00\x00\x00\x07" + b"\x00\x02me" + b"\x00"
    assert frame == len(header + b"BODY").to_bytes(4, "big") + header + b"BODY"


def test_a_response_header_has_tagged_fields_except_api_versions_s() -> None:
    correlation, reader = response(b"\x00\x00\x00\x09" + b"\x00" + b"\x00\x01")
    assert (correlation, reader.int16()) == (9, 1)
    correlation, reader = response(b"\x00\x00\x00\x09" + b"\x00\x01", header_tags=False)
    assert (correlation, reader.int16()) == (9, 1)


def test_a_response_that_ends_early_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="ends early"):
        Reader(b"\x00\x01").int32()
