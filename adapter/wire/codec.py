"""The wire format of the system topics: Avro single-object encoding of the records of
:mod:`adapter.wire.records`.

Every value the adapter writes to a system topic (half messages, end-transaction requests,
op records, check requests, scheduled messages) is one record encoded as Avro
single-object encoding: the marker ``C3 01``, the 8-byte little-endian CRC-64-AVRO
fingerprint of the schema's Parsing Canonical Form, then the Avro binary body. The
fingerprint names the schema, so :func:`decode` needs no other context and a record of a
newer schema is told apart from a damaged one.

Reproduces no RocketMQ behaviour directly: RocketMQ stores these as ordinary messages with
properties in its commit log; this module is only how the adapter serialises its stand-ins
for them. Schemas are package data (``adapter/wire/schemas/*.avsc``), found through
``importlib.resources`` in a checkout and in an installed wheel alike; each is parsed once,
on first use.

Strictness: a body is accepted only if it is exactly the bytes :func:`encode` writes for
the record it decodes to, so a record has a single encoding and anything else is
:class:`~adapter.exceptions.CorruptRecordError`: trailing bytes, negative enum or union
indexes (which fastavro would wrap around), booleans other than 0/1, over-long varints,
duplicate map keys, ``int`` fields beyond 32 bits, and maps written as several blocks or
with a negative (byte-sized) block count.

Schema evolution: a record written with another version of a schema is read through Avro
schema resolution once that version is known: versions shipped in ``schemas/history/``, or
learned at run time (:func:`learn`) from the ``lookup`` a reader passes: the
``RMQ_SYS_SCHEMAS`` topic of the cluster the record came from (:mod:`adapter.kafka.schemas`).
Only versions that follow the rule of :mod:`adapter.wire.evolution` are learned; any other raises
:class:`~adapter.exceptions.UnknownSchemaError`, and its records are parked.

Known gaps: a record read through another version is not checked for canonical encoding. Avro
encoders that split maps into several
blocks (Java's ``BlockingBinaryEncoder``) produce valid Avro this module refuses.
"""

from __future__ import annotations

import enum
import io
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from importlib import resources
from importlib.resources.abc import Traversable
from typing import IO, Any, TypeVar, cast, get_type_hints

from fastavro import parse_schema, schemaless_reader, schemaless_writer
from fastavro.schema import SchemaParseException, to_parsing_canonical_form
from fastavro.schema import fingerprint as _avro_fingerprint

from adapter.exceptions import CodecError, CorruptRecordError, UnknownSchemaError
from adapter.wire import evolution
from adapter.wire.avro_types import Check, check_for
from adapter.wire.canonical import SameBytes
from adapter.wire.records import RECORD_TYPES, Record

__all__ = [
    "MARKER",
    "HEADER_SIZE",
    "NAMESPACE",
    "encode",
    "decode",
    "decode_as",
    "fingerprint",
    "schema_dir",
    "schema_text",
    "learn",
    "SchemaSource",
]

T = TypeVar("T", bound=Record)

MARKER = b"\xc3\x01"
"""The two bytes that open every single-object-encoded record."""
HEADER_SIZE = len(MARKER) + 8
"""Marker plus the 64-bit schema fingerprint."""
NAMESPACE = "rmqkafka.v1"
"""The Avro namespace of every schema."""

# Errors fastavro (C or pure-Python reader) raises on bytes that do not fit the schema.
_READ_ERRORS = (EOFError, ValueError, IndexError, KeyError, TypeError, OverflowError)
# Errors fastavro raises on values that do not fit the schema (the checks below catch
# most first; this covers what they leave to the writer, such as lone surrogates).
_WRITE_ERRORS = (ValueError, TypeError, OverflowError, AttributeError)


@dataclass(frozen=True, slots=True)
class _Codec:
    """Everything needed to encode and decode one record type, computed once."""

    cls: type[Record]
    header: bytes
    schema: Any  # fastavro's parsed schema, logical types removed
    field_names: tuple[str, ...]
    checks: tuple[tuple[str, Check], ...]
    enums: tuple[tuple[str, type[enum.Enum]], ...]
    raw: Any
    """The ``.avsc`` JSON of the schema records are read into."""
    writer: Any = None
    """For another version of the schema: its parsed form, resolved into ``schema``."""


@dataclass(frozen=True, slots=True)
class _Registry:
    by_class: dict[type[Record], _Codec]
    by_header: dict[bytes, _Codec]


_lock = threading.Lock()
_registry: _Registry | None = None


def schema_dir() -> Traversable:
    """The package data directory holding the ``.avsc`` files."""
    return resources.files("adapter.wire") / "schemas"


def _strip_logical_types(node: Any) -> Any:
    """A copy of a schema without ``logicalType``, so timestamps stay ``int`` milliseconds."""
    if isinstance(node, dict):
        return {k: _strip_logical_types(v) for k, v in node.items() if k != "logicalType"}
    if isinstance(node, list):
        return [_strip_logical_types(v) for v in node]
    return node


def _load_one(directory: Traversable, cls: type[Record]) -> _Codec:
    path = directory / f"{cls.__name__}.avsc"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        canonical = to_parsing_canonical_form(raw)
        parsed = parse_schema(_strip_logical_types(raw))
    except (OSError, ValueError, SchemaParseException) as exc:
        raise CodecError(f"cannot load Avro schema {path}: {exc}") from exc

    expected_name = f"{NAMESPACE}.{cls.__name__}"
    found_name = parsed.get("name") if isinstance(parsed, dict) else None
    if found_name != expected_name:
        raise CodecError(f"{path} defines {found_name!r}, expected {expected_name!r}")
    schema_fields = tuple(f["name"] for f in raw["fields"])
    class_fields = tuple(f.name for f in fields(cls))
    if schema_fields != class_fields:
        raise CodecError(
            f"{path} fields {schema_fields} do not match {cls.__qualname__} fields {class_fields}"
        )

    hints = get_type_hints(cls)
    enums = tuple(
        (name, hint)
        for name in class_fields
        if isinstance(hint := hints[name], type) and issubclass(hint, enum.Enum)
    )
    for f in raw["fields"]:
        if isinstance(f["type"], dict) and f["type"].get("type") == "enum":
            hint = hints[f["name"]]
            symbols = list(f["type"]["symbols"])
            is_enum = isinstance(hint, type) and issubclass(hint, enum.Enum)
            values = [m.value for m in hint] if is_enum else None
            if values != symbols:
                raise CodecError(
                    f"{path} field {f['name']} has symbols {symbols}, "
                    f"{cls.__qualname__}.{f['name']} has {values}"
                )
    checks = tuple(
        (f["name"], check_for(f["type"], f"{path} field {f['name']}")) for f in raw["fields"]
    )
    fp = bytes.fromhex(_avro_fingerprint(canonical, "CRC-64-AVRO"))
    return _Codec(
        cls=cls,
        header=MARKER + fp,
        schema=parsed,
        field_names=class_fields,
        checks=checks,
        enums=enums,
        raw=raw,
    )


def _load(
    directory: Traversable | None = None, types: tuple[type[Record], ...] = RECORD_TYPES
) -> _Registry:
    """The codecs of ``types`` from the ``.avsc`` files in ``directory`` (the package's)."""
    directory = directory or schema_dir()
    if not (directory / f"{types[0].__name__}.avsc").is_file():
        raise CodecError(f"no Avro schemas in {directory}: the package is incomplete")
    by_class = {cls: _load_one(directory, cls) for cls in types}
    by_header = {c.header: c for c in by_class.values()}
    if len(by_header) != len(by_class):
        raise CodecError("two record schemas share a fingerprint")
    registry = _Registry(by_class=by_class, by_header=by_header)
    history = directory / "history"
    if history.is_dir():
        for path in sorted(history.iterdir(), key=lambda t: t.name):
            if path.name.endswith(".avsc"):
                _learn_into(registry, path.read_text(encoding="utf-8"))
    return registry


def _learn_into(registry: _Registry, text: str) -> bytes:
    try:
        raw = json.loads(text)
        canonical = to_parsing_canonical_form(raw)
        writer = parse_schema(_strip_logical_types(raw))
    except (ValueError, TypeError, SchemaParseException) as exc:
        raise CodecError(f"not an Avro schema: {exc}") from exc
    fp = bytes.fromhex(_avro_fingerprint(canonical, "CRC-64-AVRO"))
    header = MARKER + fp
    if header in registry.by_header:
        return fp
    name = raw.get("name") if isinstance(raw, dict) else None
    reader = next((c for c in registry.by_class.values() if c.cls.__name__ == name), None)
    if reader is None or raw.get("namespace") != NAMESPACE:
        raise CodecError(f"schema {fp.hex()} is not a version of a system-topic record")
    problems = evolution.problems(reader.raw, raw)
    if problems:
        raise CodecError(
            f"schema {fp.hex()} of {name} cannot be read by this version: " + "; ".join(problems)
        )
    registry.by_header[header] = replace(reader, header=header, writer=writer)
    return fp


def learn(text: str) -> bytes:
    """Read records of another version of a schema (its ``.avsc`` text) from now on, through
    Avro schema resolution into this version's; return its fingerprint.

    Raises:
        CodecError: ``text`` is not an Avro schema, names no system-topic record, or breaks
            the evolution rule (:mod:`adapter.wire.evolution`); the reason says how.
    """
    registry = _get_registry()
    with _lock:
        return _learn_into(registry, text)


SchemaSource = Callable[[bytes], "str | None"]
"""Finds the ``.avsc`` text of a schema by its 8-byte fingerprint (None: not known there):
the schemas topic of the cluster a record was read from (:mod:`adapter.kafka.schemas`)."""


def schema_text(cls: type[Record]) -> str:
    """The ``.avsc`` JSON of ``cls``'s schema, as another version learns it."""
    return json.dumps(_codec_for(cls).raw, separators=(",", ":"))


def _get_registry() -> _Registry:
    global _registry
    registry = _registry
    if registry is None:
        with _lock:
            registry = _registry
            if registry is None:
                registry = _registry = _load()
    return registry


def _codec_for(cls: type[Any]) -> _Codec:
    codec = _get_registry().by_class.get(cls)
    if codec is None:
        raise CodecError(f"{cls!r} is not a system-topic record type")
    return codec


def _write_body(codec: _Codec, record: Record, out: IO[bytes] | SameBytes) -> None:
    """Check ``record`` against its schema and write its Avro binary body to ``out``."""
    datum = {name: getattr(record, name) for name in codec.field_names}
    for name, enum_cls in codec.enums:
        value = datum[name]
        if not isinstance(value, enum_cls):
            raise CodecError(
                f"{codec.cls.__name__}.{name} must be a {enum_cls.__name__}, got {value!r:.200}"
            )
        datum[name] = value.value
    for name, check in codec.checks:
        if not check(datum[name]):
            raise CodecError(
                f"{codec.cls.__name__}.{name} does not fit its Avro type: {datum[name]!r:.200}"
            )
    try:
        schemaless_writer(cast("IO[bytes]", out), codec.schema, datum)
    except _WRITE_ERRORS as exc:
        raise CodecError(f"{codec.cls.__name__} does not fit its schema: {exc}") from exc


def encode(record: Record) -> bytes:
    """Encode a record as Avro single-object encoding (header, then Avro binary).

    Raises:
        CodecError: ``record`` is not a record type, or a field value does not fit the
            schema (wrong type, ``int`` beyond 32 bits, ``long`` beyond 64, a string that
            is not encodable as UTF-8, an enum field holding something else).
    """
    codec = _codec_for(type(record))
    out = io.BytesIO()
    out.write(codec.header)
    _write_body(codec, record, out)
    return out.getvalue()


def fingerprint(cls: type[Record]) -> bytes:
    """The 8-byte little-endian CRC-64-AVRO fingerprint of ``cls``'s schema.

    Raises:
        CodecError: ``cls`` is not a record type.
    """
    return _codec_for(cls).header[len(MARKER) :]


def _as_bytes(data: bytes) -> bytes:
    if type(data) is bytes:
        return data
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"expected bytes, got {type(data).__name__}")


def _codec_for_header(data: bytes, lookup: SchemaSource | None = None) -> _Codec:
    """The codec named by ``data``'s header (asking ``lookup`` for a fingerprint no known
    schema has); ``data`` must already be ``bytes``."""
    if len(data) < HEADER_SIZE:
        raise CorruptRecordError(
            f"{len(data)} bytes, shorter than the {HEADER_SIZE}-byte header", raw=data
        )
    if data[: len(MARKER)] != MARKER:
        raise CorruptRecordError(
            f"no single-object marker (starts with {data[: len(MARKER)].hex()})", raw=data
        )
    registry = _get_registry()
    codec = registry.by_header.get(data[:HEADER_SIZE])
    if codec is None:
        codec = _look_up(registry, data, lookup)
    return codec


def _look_up(registry: _Registry, data: bytes, lookup: SchemaSource | None) -> _Codec:
    """The codec of a fingerprint no known schema has, learned from ``lookup``."""
    fp = data[len(MARKER) : HEADER_SIZE]
    why = "unknown schema fingerprint " + fp.hex()
    text = lookup(fp) if lookup is not None else None
    if text is not None:
        try:
            learn(text)
        except CodecError as exc:
            why = f"{why}: {exc}"
        found = registry.by_header.get(data[:HEADER_SIZE])
        if found is not None:
            return found
    raise UnknownSchemaError(why, raw=data)


def decode(data: bytes, *, lookup: SchemaSource | None = None) -> Record:
    """Decode one record of any known schema, choosing the schema by its fingerprint.

    Raises:
        CorruptRecordError: ``data`` is too short, lacks the marker, or its body is not
            exactly one record in the encoding :func:`encode` writes. ``raw`` is ``data``.
        UnknownSchemaError: The header is well formed but names no schema known here.
    """
    data = _as_bytes(data)
    return _decode_with(_codec_for_header(data, lookup), data)


def _decode_with(codec: _Codec, data: bytes, canonical: bool = True) -> Record:
    name = codec.cls.__name__
    stream = io.BytesIO(data)
    stream.seek(HEADER_SIZE)
    try:
        if codec.writer is None:
            datum = schemaless_reader(stream, codec.schema, None)
        else:
            datum = schemaless_reader(stream, codec.writer, codec.schema)
            canonical = False  # another version's bytes: there is no one encoding to compare
    except _READ_ERRORS as exc:
        raise CorruptRecordError(
            f"{name} body does not decode: {type(exc).__name__}: {exc}", raw=data
        ) from exc
    end = stream.tell()
    if end != len(data):
        raise CorruptRecordError(
            f"{len(data) - end} trailing bytes after a complete {name}", raw=data
        )
    if not isinstance(datum, dict):  # pragma: no cover - a record schema reads a dict
        raise CorruptRecordError(f"{name} body is not a record", raw=data)
    try:
        for field_name, enum_cls in codec.enums:
            datum[field_name] = enum_cls(datum[field_name])
        record: Record = codec.cls(**datum)
        if not canonical:
            return record
        comparer = SameBytes(data, HEADER_SIZE)
        _write_body(codec, record, comparer)
    except (CodecError, ValueError, TypeError) as exc:
        raise CorruptRecordError(f"{name} body holds invalid values: {exc}", raw=data) from exc
    if not comparer.matched_all():
        raise CorruptRecordError(
            f"{name} body is not in canonical encoding (bad enum or union index, boolean "
            "byte, over-long number, duplicate map key or a map in several blocks)",
            raw=data,
        )
    return record


def decode_as(
    cls: type[T], data: bytes, *, canonical: bool = True, lookup: SchemaSource | None = None
) -> T:
    """Decode a record that must be of type ``cls``.

    With ``canonical=False`` the body is not re-encoded to prove it is in canonical form
    (half the cost): for hot paths that only need the values, such as the forwarder.

    Raises:
        CorruptRecordError: As :func:`decode`, or the bytes are a record of another known
            schema (a record on the wrong topic is as unusable as a damaged one).
        UnknownSchemaError: The header names no schema known here.
        CodecError: ``cls`` is not a record type.
    """
    wanted = _codec_for(cls)
    data = _as_bytes(data)
    found = _codec_for_header(data, lookup)
    if found.cls is not wanted.cls:
        raise CorruptRecordError(
            f"expected a {cls.__name__}, found a {found.cls.__name__}", raw=data
        )
    record = _decode_with(found, data, canonical)
    if not isinstance(record, cls):  # pragma: no cover - the header named cls
        raise CorruptRecordError(f"expected a {cls.__name__}", raw=data)
    return record
