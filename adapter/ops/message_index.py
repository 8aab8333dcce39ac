"""The message index read without Spark: where a message, or a key's messages, sit on Kafka.

Plays the part of RocketMQ's index file for ``rmq-adapter message query|show``: the Spark job
``rmq-adapter spark index`` (:mod:`adapter.spark.index`) keeps a Delta table of every record's
message id, keys, tag, topic, partition, offset and times; this reads it with the ``deltalake``
package (delta-rs, a native library: no JVM), through its SQL engine, and answers two
questions: the places of the records that match (:meth:`MessageIndex.places`), and how far the
index reaches in each partition (:meth:`MessageIndex.high_water`), so that the caller scans
only the records that are newer and the answer is complete.

Known gaps: a lookup by id or key reads the whole ``msg_id`` or ``keys`` column of the topics
asked (ids and keys are random, so file statistics cannot prune them); only the topic is a
partition of the table.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from adapter import naming
from adapter.exceptions import AdapterError

ENV_INDEX = "RMQ_ADAPTER_MESSAGE_INDEX"
_INSTALL = "pip install 'rmq-kafka-adapter[index]'"

Place = tuple[str, int, int]
"""Kafka topic, partition, offset."""


def literal(text: str) -> str:
    """``text`` as an SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def conditions(
    topics: Iterable[str] | None,
    window: tuple[int, int] | None = None,
    msg_id: str | None = None,
    key: str | None = None,
    tag: str | None = None,
) -> str:
    """The SQL ``WHERE`` condition of a lookup: RocketMQ ``topics`` (all when ``None``), stored
    in the ``window`` [begin, end) in epoch ms (any time when ``None``), with the id, key (one of
    the keys) and tag given; ``TRUE`` when nothing is asked."""
    where = ["TRUE"]
    if window is not None:
        stored_us = "CAST(stored_time AS BIGINT)"  # a Delta timestamp: microseconds, UTC
        where += [
            f"{stored_us} >= {int(window[0]) * 1000}",
            f"{stored_us} < {int(window[1]) * 1000}",
        ]
    if topics is not None:
        where.append(f"topic IN ({', '.join(literal(t) for t in topics) or literal('')})")
    if msg_id is not None:
        where.append(f"msg_id = {literal(msg_id)}")
    if key is not None:
        where.append(f"array_has(keys, {literal(key)})")
    if tag is not None:
        where.append(f"tags = {literal(tag)}")
    return " AND ".join(where)


def _first_line(exc: Exception) -> str:
    """delta-rs errors carry a native backtrace after their first line."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class MessageIndex:
    """The Delta table at ``path``; ``AdapterError`` when there is none or it cannot be read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            from deltalake import DeltaTable
        except ImportError as exc:
            raise AdapterError(f"reading the message index needs deltalake: {_INSTALL}") from exc
        if not any((path / "_delta_log").glob("*.json")):
            raise AdapterError(
                f"no message index at {path}: build it with "
                f"`rmq-adapter spark index --table {path}`, or drop --index"
            )
        try:
            self._table = DeltaTable(str(path.resolve()))
        except Exception as exc:  # noqa: BLE001 - delta-rs raises several kinds
            raise AdapterError(
                f"the message index at {path} cannot be read: {_first_line(exc)}"
            ) from exc

    def _rows(self, sql: str) -> list[dict[str, Any]]:
        from deltalake import QueryBuilder

        try:
            batches = QueryBuilder().register("rows", self._table).execute(sql).read_all()
        except Exception as exc:  # noqa: BLE001 - delta-rs raises several kinds
            raise AdapterError(
                f"the message index at {self.path} cannot be read: {_first_line(exc)}"
            ) from exc
        columns = {name: batches.column(name).to_pylist() for name in batches.column_names}
        rows = zip(*columns.values(), strict=True)
        return [dict(zip(columns, values, strict=True)) for values in rows]

    def places(
        self,
        topics: Iterable[str] | None,
        begin_ms: int,
        end_ms: int,
        *,
        msg_id: str | None = None,
        key: str | None = None,
        tag: str | None = None,
    ) -> list[Place]:
        """The places (Kafka topic names) of the indexed records that match, in order."""
        where = conditions(topics, (begin_ms, end_ms), msg_id, key, tag)
        rows = self._rows(
            f'SELECT DISTINCT topic, "partition", "offset" FROM rows WHERE {where} '  # noqa: S608 - literals escaped
            f'ORDER BY topic, "partition", "offset"'
        )
        return [(naming.kafka_topic(r["topic"]), r["partition"], r["offset"]) for r in rows]

    def high_water(self, topics: Iterable[str] | None = None) -> dict[tuple[str, int], int]:
        """Per (Kafka topic, partition) of ``topics`` (RocketMQ names; all when ``None``), the
        offset after the last indexed record: what is there and after is not in the index."""
        rows = self._rows(
            f'SELECT topic, "partition", MAX("offset") AS last FROM rows '  # noqa: S608 - literals escaped
            f"WHERE {conditions(topics)} "
            f'GROUP BY topic, "partition"'
        )
        return {(naming.kafka_topic(r["topic"]), r["partition"]): r["last"] + 1 for r in rows}
