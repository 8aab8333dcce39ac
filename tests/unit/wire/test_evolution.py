"""Two releases read each other's records: the evolution rule and the codec's resolution."""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastavro import parse_schema, schemaless_writer
from fastavro.schema import fingerprint, to_parsing_canonical_form

from adapter.exceptions import CodecError, UnknownSchemaError
from adapter.wire import codec, evolution
from adapter.wire.records import RECORD_TYPES, EndTransaction, OpKind, OpRecord, TransactionDecision
from tests.records import EXAMPLES

pytestmark = pytest.mark.timeout(30)

TODAY = EXAMPLES[OpRecord]
NOTE = {"name": "note", "type": ["null", "string"], "default": None, "doc": "Added later."}


def today_schema(cls: type = OpRecord) -> dict:
    return json.loads(codec.schema_text(cls))


def next_schema(*added: dict) -> dict:
    """Today's OpRecord schema with fields appended, as the next release would ship it."""
    schema = today_schema()
    schema["fields"] = [*schema["fields"], *added]
    return schema


def written_by(schema: dict, datum: dict) -> bytes:
    """What a writer of ``schema`` puts on the wire (single-object encoding)."""
    fp = bytes.fromhex(fingerprint(to_parsing_canonical_form(schema), "CRC-64-AVRO"))
    out = io.BytesIO(codec.MARKER + fp)
    out.seek(0, io.SEEK_END)
    schemaless_writer(out, parse_schema(schema), datum)
    return out.getvalue()


def datum_of(record: OpRecord, **more: object) -> dict:
    return {
        "transaction_id": record.transaction_id,
        "half_partition": record.half_partition,
        "half_offset": record.half_offset,
        "kind": record.kind.value,
        "check_times": record.check_times,
        "producer_group": record.producer_group,
        "reason": record.reason,
        "timestamp": record.timestamp,
        **more,
    }


@pytest.fixture(autouse=True)
def fresh_codec(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test learns into its own registry."""
    monkeypatch.setattr(codec, "_registry", None)


# -- the rule -------------------------------------------------------------------------------


def test_an_appended_optional_field_is_compatible_both_ways() -> None:
    assert evolution.problems(today_schema(), next_schema(NOTE)) == []
    assert evolution.problems(next_schema(NOTE), today_schema()) == []


def test_an_appended_required_field_is_refused_with_the_rule() -> None:
    [problem] = evolution.problems(today_schema(), next_schema({"name": "note", "type": "string"}))
    assert "'note'" in problem
    assert "not optional" in problem


def test_a_null_first_union_without_a_null_default_is_refused() -> None:
    added = {"name": "note", "type": ["null", "string"]}
    assert evolution.problems(today_schema(), next_schema(added))


def test_a_retyped_renamed_or_removed_field_is_refused() -> None:
    retyped = next_schema()
    retyped["fields"][2]["type"] = "int"
    assert "retyped" in evolution.problems(today_schema(), retyped)[0]
    renamed = next_schema()
    renamed["fields"][0]["name"] = "txn_id"
    assert "renamed" in evolution.problems(today_schema(), renamed)[0]
    removed = next_schema()
    removed["fields"] = removed["fields"][:-1]  # timestamp, which is required
    assert "not optional" in evolution.problems(today_schema(), removed)[0]


def test_a_new_enum_symbol_is_a_retyped_field() -> None:
    schema = next_schema()
    kind = schema["fields"][3]["type"]
    kind["symbols"] = [*kind["symbols"], "RECALL"]
    assert evolution.problems(today_schema(), schema)


def test_another_record_type_is_not_a_version() -> None:
    assert "is not" in evolution.problems(today_schema(), today_schema(EndTransaction))[0]


def test_documentation_changes_alone_are_compatible() -> None:
    schema = next_schema()
    schema["fields"][0]["doc"] = "Reworded."
    assert evolution.problems(today_schema(), schema) == []


# -- today's reader, a newer writer ---------------------------------------------------------


def test_a_record_of_the_next_release_is_unknown_until_its_schema_is_learned() -> None:
    data = written_by(next_schema(NOTE), datum_of(TODAY, note="from the future"))
    with pytest.raises(UnknownSchemaError):
        codec.decode_as(OpRecord, data)
    codec.learn(json.dumps(next_schema(NOTE)))
    assert codec.decode_as(OpRecord, data) == TODAY, "the appended field is skipped"


def test_the_reader_s_lookup_is_asked_for_an_unknown_fingerprint() -> None:
    schema = next_schema(NOTE)
    asked: list[bytes] = []

    def source(fp: bytes) -> str | None:
        asked.append(fp)
        return json.dumps(schema)

    data = written_by(schema, datum_of(TODAY, note=None))
    assert codec.decode(data, lookup=source) == TODAY
    assert codec.decode(data, lookup=source) == TODAY
    assert len(asked) == 1, "learned once, then known"


def test_a_source_offering_an_incompatible_schema_leaves_the_record_unknown_with_the_reason() -> (
    None
):
    schema = next_schema({"name": "note", "type": "string"})
    data = written_by(schema, datum_of(TODAY, note="x"))
    with pytest.raises(UnknownSchemaError, match="not optional"):
        codec.decode(data, lookup=lambda _fp: json.dumps(schema))


def test_learning_a_schema_that_is_not_a_system_record_is_refused() -> None:
    foreign = {"type": "record", "name": "Payment", "namespace": "shop", "fields": []}
    with pytest.raises(CodecError, match="not a version of a system-topic record"):
        codec.learn(json.dumps(foreign))
    with pytest.raises(CodecError, match="not an Avro schema"):
        codec.learn("{")


# -- the next release's reader, today's writer ----------------------------------------------


def test_the_next_release_reads_todays_records_with_the_new_field_null(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    today_bytes = codec.encode(TODAY)
    today_text = codec.schema_text(OpRecord)
    end_bytes = codec.encode(
        EndTransaction(
            transaction_id="t-7",
            producer_group="PG_orders",
            half_partition=3,
            half_offset=42,
            decision=TransactionDecision.COMMIT,
            from_check=False,
            timestamp=0,
        )
    )

    @dataclass(frozen=True, slots=True, kw_only=True)
    class NextOpRecord:
        """OpRecord as the next release would declare it: one optional field appended."""

        transaction_id: str
        half_partition: int
        half_offset: int
        kind: OpKind
        check_times: int
        producer_group: str
        reason: str | None = None
        timestamp: int
        note: str | None = None

    # The next release's package: its OpRecord has the note; the other schemas are today's.
    NextOpRecord.__name__ = "OpRecord"
    for cls in RECORD_TYPES:
        schema = next_schema(NOTE) if cls is OpRecord else today_schema(cls)
        (tmp_path / f"{cls.__name__}.avsc").write_text(json.dumps(schema))
    types = tuple(NextOpRecord if cls is OpRecord else cls for cls in RECORD_TYPES)
    next_release = codec._load(tmp_path, types)  # type: ignore[arg-type]
    monkeypatch.setattr(codec, "_registry", next_release)

    with pytest.raises(UnknownSchemaError):
        codec.decode(today_bytes)
    codec.learn(today_text)  # shipped in schemas/history/, or read from RMQ_SYS_SCHEMAS
    read = codec.decode(today_bytes)
    assert isinstance(read, NextOpRecord)
    assert read.note is None
    assert read.half_offset == TODAY.half_offset
    assert read.kind is TODAY.kind
    assert codec.decode(end_bytes).half_offset == 42, "unchanged schemas read as before"
    written = codec.encode(NextOpRecord(**{**datum_of(TODAY), "kind": TODAY.kind}))
    assert written[:10] != today_bytes[:10], "the next release writes its own fingerprint"
