"""The system-topic wire format: Avro single-object encoding of the adapter's records."""

from __future__ import annotations

import dataclasses
import itertools
import json
import struct
from typing import Any

import pytest
from fastavro.schema import fingerprint as avro_fingerprint
from fastavro.schema import to_parsing_canonical_form
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapter.exceptions import CodecError, CorruptRecordError, UnknownSchemaError
from adapter.wire import codec
from adapter.wire.records import (
    RECORD_TYPES,
    CheckRequest,
    EndTransaction,
    HalfMessage,
    OpKind,
    OpRecord,
    Record,
    ScheduledMessage,
    TransactionDecision,
)
from tests.records import EXAMPLES

pytestmark = pytest.mark.timeout(60)

FUZZ = settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# -- strategies ------------------------------------------------------------------------------

INT32 = st.integers(min_value=-(2**31), max_value=2**31 - 1)
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
TEXT = st.text(max_size=40)  # empty, ASCII and non-ASCII (no lone surrogates: not UTF-8)
OPT_TEXT = st.none() | TEXT
PROPERTIES = st.dictionaries(TEXT, TEXT, max_size=6)
SMALL_BODY = st.binary(max_size=300)
# Large bodies are built by repetition: cheap to generate, up to about 1 MiB.
LARGE_BODY = st.tuples(
    st.binary(min_size=1, max_size=16), st.integers(min_value=1, max_value=70_000)
).map(lambda pair: (pair[0] * pair[1])[: 1 << 20])
BODY = st.one_of(SMALL_BODY, SMALL_BODY, LARGE_BODY)

HALF_MESSAGES = st.builds(
    HalfMessage,
    transaction_id=TEXT,
    producer_group=TEXT,
    topic=TEXT,
    queue_id=INT32,
    tags=OPT_TEXT,
    keys=OPT_TEXT,
    properties=PROPERTIES,
    body=BODY,
    born_timestamp=INT64,
)
END_TRANSACTIONS = st.builds(
    EndTransaction,
    transaction_id=TEXT,
    producer_group=TEXT,
    half_partition=INT32,
    half_offset=INT64,
    decision=st.sampled_from(TransactionDecision),
    from_check=st.booleans(),
    check_times=INT32,
    remark=OPT_TEXT,
    timestamp=INT64,
)
OP_RECORDS = st.builds(
    OpRecord,
    transaction_id=TEXT,
    half_partition=INT32,
    half_offset=INT64,
    kind=st.sampled_from(OpKind),
    check_times=INT32,
    producer_group=TEXT,
    reason=OPT_TEXT,
    timestamp=INT64,
)
CHECK_REQUESTS = st.builds(
    CheckRequest,
    transaction_id=TEXT,
    producer_group=TEXT,
    half_partition=INT32,
    half_offset=INT64,
    check_times=INT32,
    topic=TEXT,
    queue_id=INT32,
    tags=OPT_TEXT,
    keys=OPT_TEXT,
    properties=PROPERTIES,
    body=BODY,
    born_timestamp=INT64,
    requested_at=INT64,
)
SCHEDULED_MESSAGES = st.builds(
    ScheduledMessage,
    level=INT32,
    topic=TEXT,
    queue_id=INT32,
    key=st.none() | st.binary(max_size=40),
    tags=OPT_TEXT,
    keys=OPT_TEXT,
    properties=PROPERTIES,
    body=BODY,
    born_timestamp=INT64,
    unique_key=TEXT,
    reconsume_times=INT32,
)
RECORDS = st.one_of(HALF_MESSAGES, END_TRANSACTIONS, OP_RECORDS, CHECK_REQUESTS, SCHEDULED_MESSAGES)

# -- fixed examples: tests/records.py ---------------------------------------------------------


def _zigzag(n: int) -> bytes:
    """Avro's zig-zag varint, written independently of fastavro."""
    u = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        byte = u & 0x7F
        u >>= 7
        if u:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _avro_str(s: str) -> bytes:
    raw = s.encode()
    return _zigzag(len(raw)) + raw


def _crc64_avro(data: bytes) -> int:
    """CRC-64-AVRO as the Avro specification defines it."""
    empty = 0xC15D213AA4D7A795
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (empty & -(fp & 1))
        table.append(fp)
    fp = empty
    for byte in data:
        fp = (fp >> 8) ^ table[(fp ^ byte) & 0xFF]
    return fp


def _decode_or_error(data: bytes) -> Record | CodecError:
    try:
        return codec.decode(data)
    except CodecError as exc:
        return exc


def _assert_decodes_or_raises_codec_error(data: bytes, original: Record, encoded: bytes) -> None:
    result = _decode_or_error(data)
    if isinstance(result, CodecError):
        assert result.raw == data
        assert isinstance(result, (CorruptRecordError, UnknownSchemaError))
    else:
        # Anything accepted is in canonical form: it is the original only if nothing changed.
        assert codec.encode(result) == data
        assert (result == original) == (data == encoded)


# -- tests -----------------------------------------------------------------------------------


@FUZZ
@given(RECORDS)
def test_every_record_survives_a_round_trip(record: Record) -> None:
    data = codec.encode(record)

    decoded = codec.decode(data)

    assert type(decoded) is type(record)
    assert decoded == record
    assert codec.decode_as(type(record), data) == record
    assert codec.encode(decoded) == data


@FUZZ
@given(record=RECORDS, data=st.data())
def test_flipping_or_cutting_bytes_gives_a_corrupt_record_error_with_the_raw_bytes(
    record: Record, data: st.DataObject
) -> None:
    encoded = codec.encode(record)
    how = data.draw(st.sampled_from(["truncate", "append", "flip", "insert", "random"]))
    if how == "truncate":
        at = data.draw(st.integers(min_value=0, max_value=len(encoded) - 1))
        mutated = encoded[:at]
    elif how == "append":
        mutated = encoded + data.draw(st.binary(min_size=1, max_size=16))
    elif how == "flip":
        at = data.draw(st.integers(min_value=0, max_value=len(encoded) - 1))
        mask = data.draw(st.integers(min_value=1, max_value=255))
        mutated = encoded[:at] + bytes([encoded[at] ^ mask]) + encoded[at + 1 :]
    elif how == "insert":
        at = data.draw(st.integers(min_value=0, max_value=len(encoded)))
        mutated = encoded[:at] + data.draw(st.binary(min_size=1, max_size=8)) + encoded[at:]
    else:
        mutated = data.draw(st.binary(max_size=64))

    if how in ("truncate", "append"):
        with pytest.raises(CorruptRecordError) as caught:
            codec.decode(mutated)
        assert caught.value.raw == mutated
    else:
        _assert_decodes_or_raises_codec_error(mutated, record, encoded)


@FUZZ
@given(cls=st.sampled_from(RECORD_TYPES), body=st.binary(max_size=80))
def test_random_bytes_after_a_valid_header_decode_or_raise_a_codec_error(
    cls: type[Record], body: bytes
) -> None:
    data = b"\xc3\x01" + codec.fingerprint(cls) + body

    _assert_decodes_or_raises_codec_error(data, EXAMPLES[cls], codec.encode(EXAMPLES[cls]))


def test_an_unknown_fingerprint_is_told_apart_from_corruption() -> None:
    encoded = codec.encode(EXAMPLES[HalfMessage])
    known = {codec.fingerprint(cls) for cls in RECORD_TYPES}
    unknown = bytes(8)
    assert unknown not in known
    newer_schema = encoded[:2] + unknown + encoded[10:]
    no_marker = b"\xc3\x02" + encoded[2:]
    too_short = encoded[:9]

    with pytest.raises(UnknownSchemaError) as caught:
        codec.decode(newer_schema)
    assert not isinstance(caught.value, CorruptRecordError)
    assert caught.value.raw == newer_schema
    with pytest.raises(UnknownSchemaError):
        codec.decode_as(HalfMessage, newer_schema)
    for corrupt in (no_marker, too_short, b""):
        with pytest.raises(CorruptRecordError) as caught_corrupt:
            codec.decode(corrupt)
        assert not isinstance(caught_corrupt.value, UnknownSchemaError)
        assert caught_corrupt.value.raw == corrupt


@pytest.mark.parametrize(
    ("written", "wanted"),
    list(itertools.permutations(RECORD_TYPES, 2)),
    ids=lambda cls: cls.__name__,
)
def test_decode_as_refuses_another_schema(written: type[Record], wanted: type[Record]) -> None:
    data = codec.encode(EXAMPLES[written])

    with pytest.raises(CorruptRecordError, match=f"expected a {wanted.__name__}") as caught:
        codec.decode_as(wanted, data)

    assert caught.value.raw == data
    assert codec.decode_as(written, data) == EXAMPLES[written]


@pytest.mark.parametrize("cls", RECORD_TYPES, ids=lambda cls: cls.__name__)
def test_the_header_is_the_avro_single_object_marker_and_fingerprint(cls: type[Record]) -> None:
    schema = json.loads((codec.schema_dir() / f"{cls.__name__}.avsc").read_text("utf-8"))
    canonical = to_parsing_canonical_form(schema)
    expected = bytes.fromhex(avro_fingerprint(canonical, "CRC-64-AVRO"))

    data = codec.encode(EXAMPLES[cls])

    assert data[:2] == b"\xc3\x01"
    assert data[2:10] == expected == codec.fingerprint(cls)
    # Little-endian, as the single-object encoding specifies (checked without fastavro).
    assert expected == struct.pack("<Q", _crc64_avro(canonical.encode()))


@pytest.mark.parametrize("cls", RECORD_TYPES, ids=lambda cls: cls.__name__)
def test_each_schema_mirrors_its_dataclass_and_documents_every_field(cls: type[Record]) -> None:
    schema = json.loads((codec.schema_dir() / f"{cls.__name__}.avsc").read_text("utf-8"))

    assert schema["namespace"] == "rmqkafka.v1"
    assert schema["name"] == cls.__name__
    assert [f["name"] for f in schema["fields"]] == [f.name for f in dataclasses.fields(cls)]
    assert all(f.get("doc") for f in schema["fields"])
    for f in schema["fields"]:
        if f["name"] in ("born_timestamp", "requested_at", "timestamp"):
            assert f["type"] == {"type": "long", "logicalType": "timestamp-millis"}


@pytest.mark.parametrize("millis", [0, -1, 1_700_000_000_123, 2**63 - 1, -(2**63)])
def test_timestamps_come_back_as_plain_int_milliseconds(millis: int) -> None:
    base = EXAMPLES[CheckRequest]
    assert isinstance(base, CheckRequest)
    record = dataclasses.replace(base, born_timestamp=millis, requested_at=millis)

    decoded = codec.decode(codec.encode(record))

    assert isinstance(decoded, CheckRequest)
    assert type(decoded.born_timestamp) is int
    assert decoded.born_timestamp == decoded.requested_at == millis


def test_the_dataclass_defaults_are_the_schema_defaults() -> None:
    for cls in RECORD_TYPES:
        schema = json.loads((codec.schema_dir() / f"{cls.__name__}.avsc").read_text("utf-8"))
        schema_defaults = {f["name"]: f["default"] for f in schema["fields"] if "default" in f}
        class_defaults = {
            f.name: f.default
            for f in dataclasses.fields(cls)
            if f.default is not dataclasses.MISSING
        }
        assert class_defaults == schema_defaults, cls.__name__


@pytest.mark.parametrize(
    ("cls", "changes"),
    [
        (HalfMessage, {"queue_id": 2**31}),
        (HalfMessage, {"queue_id": True}),
        (HalfMessage, {"born_timestamp": 2**63}),
        (HalfMessage, {"born_timestamp": 1.5}),
        (HalfMessage, {"body": "not bytes"}),
        (HalfMessage, {"topic": b"not str"}),
        (HalfMessage, {"topic": "lone \ud800 surrogate"}),
        (HalfMessage, {"tags": 7}),
        (HalfMessage, {"properties": {"k": 1}}),
        (HalfMessage, {"properties": [("k", "v")]}),
        (EndTransaction, {"decision": "COMMIT"}),
        (EndTransaction, {"decision": OpKind.COMMIT}),
        (EndTransaction, {"from_check": 1}),
        (OpRecord, {"kind": None}),
        (ScheduledMessage, {"key": "not bytes"}),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else repr(v),
)
def test_values_that_do_not_fit_the_schema_raise_a_codec_error(
    cls: type[Record], changes: dict[str, Any]
) -> None:
    record = dataclasses.replace(EXAMPLES[cls], **changes)

    with pytest.raises(CodecError):
        codec.encode(record)


def test_only_record_types_can_be_encoded() -> None:
    with pytest.raises(CodecError):
        codec.encode(object())  # type: ignore[arg-type]
    with pytest.raises(CodecError):
        codec.decode_as(dict, codec.encode(EXAMPLES[OpRecord]))  # type: ignore[type-var]


def _op_record_body(*, kind_index: int, reason_branch: int) -> bytes:
    """An OpRecord body written by hand, with chosen enum and union indexes."""
    reason = _avro_str("why") if reason_branch in (1, -1) else b""
    return (
        _avro_str("tx")  # transaction_id
        + _zigzag(0)  # half_partition
        + _zigzag(7)  # half_offset
        + _zigzag(kind_index)  # kind
        + _zigzag(1)  # check_times
        + _avro_str("group")  # producer_group
        + _zigzag(reason_branch)  # reason
        + reason
        + _zigzag(123)  # timestamp
    )


def test_hand_written_avro_from_another_encoder_decodes() -> None:
    body = _op_record_body(kind_index=3, reason_branch=1)
    data = b"\xc3\x01" + codec.fingerprint(OpRecord) + body

    assert codec.decode(data) == OpRecord(
        transaction_id="tx",
        half_partition=0,
        half_offset=7,
        kind=OpKind.DISCARD,
        check_times=1,
        producer_group="group",
        reason="why",
        timestamp=123,
    )


@pytest.mark.parametrize(
    ("kind_index", "reason_branch"),
    [(-1, 1), (4, 1), (3, -1), (3, -2), (3, 2)],
    ids=["enum -1", "enum 4", "union -1", "union -2", "union 2"],
)
def test_a_negative_or_too_large_index_is_corruption_not_a_wrapped_value(
    kind_index: int, reason_branch: int
) -> None:
    body = _op_record_body(kind_index=kind_index, reason_branch=reason_branch)
    data = b"\xc3\x01" + codec.fingerprint(OpRecord) + body

    with pytest.raises(CorruptRecordError) as caught:
        codec.decode(data)

    assert caught.value.raw == data


def _end_transaction_body(
    *,
    half_partition: bytes = b"\x00",
    from_check: bytes = b"\x00",
    remark: bytes = b"\x00",
) -> bytes:
    """An EndTransaction body written by hand; each argument is already Avro binary."""
    return b"".join(
        [
            _avro_str("tx"),  # transaction_id
            _avro_str("g"),  # producer_group
            half_partition,
            _zigzag(0),  # half_offset
            _zigzag(0),  # decision: COMMIT
            from_check,
            _zigzag(0),  # check_times
            remark,
            _zigzag(0),  # timestamp
        ]
    )


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(_end_transaction_body(from_check=b"\x02"), id="boolean byte 2"),
        pytest.param(_end_transaction_body(half_partition=b"\x80\x80\x00"), id="over-long varint"),
        pytest.param(_end_transaction_body(half_partition=_zigzag(2**31)), id="int beyond 32 bits"),
        pytest.param(
            _end_transaction_body(remark=_zigzag(1) + _zigzag(2) + b"\xff\xfe"), id="invalid utf-8"
        ),
    ],
)
def test_bodies_fastavro_would_bend_into_shape_are_corruption(body: bytes) -> None:
    header = b"\xc3\x01" + codec.fingerprint(EndTransaction)
    assert isinstance(codec.decode(header + _end_transaction_body()), EndTransaction)
    data = header + body

    with pytest.raises(CorruptRecordError) as caught:
        codec.decode(data)

    assert caught.value.raw == data


def test_bytearray_and_memoryview_input_decode_like_bytes() -> None:
    data = codec.encode(EXAMPLES[ScheduledMessage])

    assert codec.decode(bytearray(data)) == EXAMPLES[ScheduledMessage]  # type: ignore[arg-type]
    view = memoryview(data)
    assert codec.decode_as(ScheduledMessage, view) == EXAMPLES[ScheduledMessage]  # type: ignore[arg-type]


def test_a_duplicate_map_key_is_corruption() -> None:
    entry = _avro_str("k") + _avro_str("v")
    body = b"".join(
        [
            _avro_str("tx"),  # transaction_id
            _avro_str("g"),  # producer_group
            _avro_str("T"),  # topic
            _zigzag(-1),  # queue_id
            b"\x00\x00",  # tags, keys: null
            _zigzag(2) + entry + entry + b"\x00",  # properties: one block of 2 entries, end
            _avro_str(""),  # body
            _zigzag(0),  # born_timestamp
        ]
    )
    data = b"\xc3\x01" + codec.fingerprint(HalfMessage) + body

    with pytest.raises(CorruptRecordError):
        codec.decode(data)
    single = data.replace(_zigzag(2) + entry + entry, _zigzag(1) + entry)
    decoded = codec.decode(single)
    assert isinstance(decoded, HalfMessage)
    assert decoded.properties == {"k": "v"}
