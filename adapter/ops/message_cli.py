"""``rmq-adapter message show|query``: a message's life by its id, and messages by key or tag.

Plays the part of rocketmq-dashboard's message query and trace (see
:mod:`adapter.ops.message_search`). Every query is bounded by a window, ``--begin`` to
``--end`` (default: the last 24 hours), and says how many records it read and which source
answered: ``scan`` (every record of the window read) or ``index`` (the message index that
``rmq-adapter spark index`` keeps, given with ``--index PATH`` or ``RMQ_ADAPTER_MESSAGE_INDEX``,
plus a scan of the records newer than it).

Known gaps: ``show`` without the index finds a plain message's delivery only on the topics
given with ``--topic`` (or named by its half or scheduled record).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import click
from confluent_kafka import Message as KafkaRecord

from adapter import naming
from adapter import properties as prop
from adapter.clock import SYSTEM_CLOCK
from adapter.config import KafkaSettings
from adapter.kafka.reading import header_text
from adapter.ops import lifecycle
from adapter.ops.message_index import MessageIndex
from adapter.ops.message_search import MessageSearch, place_of, stored_at
from adapter.ops.options import (
    bootstrap,
    clear_errors,
    message_index,
    parse_time,
    plural,
    timeout,
)
from adapter.text_table import table

DEFAULT_WINDOW_MS = 24 * 3600 * 1000

_begin = click.option("--begin", default=None, help="Window start (default: 24 hours ago).")
_end = click.option("--end", default=None, help="Window end (default: now).")


def window(begin: str | None, end: str | None, now_ms: int) -> tuple[int, int]:
    """The window of a query in epoch milliseconds: ``begin`` to ``end`` (operators' times),
    by default the 24 hours up to now."""
    end_ms = now_ms + 1 if end is None else parse_time(end)
    begin_ms = end_ms - DEFAULT_WINDOW_MS if begin is None else parse_time(begin)
    return begin_ms, end_ms


def _search(
    bootstrap: str, begin: str | None, end: str | None, timeout: float, index: Path | None
) -> MessageSearch:
    begin_ms, end_ms = window(begin, end, SYSTEM_CLOCK.now_ms())
    conf = KafkaSettings.from_env(bootstrap).librdkafka({})
    found_by = MessageIndex(index) if index is not None else None
    return MessageSearch(conf, begin_ms, end_ms, timeout, found_by)


QUERY_HEADER = ("place", "stored (UTC)", "msg id", "tags", "keys", "bytes")


def query_rows(found: list[KafkaRecord]) -> list[tuple[str, str, str, str, str, int]]:
    """One row per record a query found, under :data:`QUERY_HEADER`."""
    return [
        (
            str(place_of(r)),
            dt.datetime.fromtimestamp(stored_at(r) / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S"),
            header_text(r, prop.UNIQ_KEY) or "-",
            header_text(r, prop.TAGS) or "-",
            header_text(r, prop.KEYS) or "-",
            len(r.value() or b""),
        )
        for r in found
    ]


@click.group("message")
def message_group() -> None:
    """Find messages: one's whole life by id, or a topic's by key or tag."""


@message_group.command("show")
@click.argument("msg_id")
@bootstrap
@click.option("--topic", "topics", multiple=True, help="Also look for its delivery here.")
@_begin
@_end
@message_index
@timeout
@clear_errors
def message_show(
    msg_id: str,
    bootstrap: str,
    topics: tuple[str, ...],
    begin: str | None,
    end: str | None,
    index: Path | None,
    timeout: float,
) -> None:
    """MSG_ID's life: born, half stored, checks, decision, timer hops, delivered, and per
    consumer group consumed, retried or dead-lettered."""
    for topic in topics:
        naming.kafka_topic(topic)  # a bad name is an error before anything is read
    life = _search(bootstrap, begin, end, timeout, index).show(msg_id, list(topics))
    click.echo(lifecycle.render(msg_id, life.steps, life.groups, life.summary()))
    if not life.steps:
        raise click.ClickException(f"no record of message {msg_id} in the window")


@message_group.command("query")
@click.option("--topic", required=True, help="The topic to search.")
@click.option("--key", default=None, help="Messages with this key (one of their KEYS).")
@click.option("--tag", default=None, help="Messages with this tag.")
@bootstrap
@_begin
@_end
@message_index
@timeout
@clear_errors
def message_query(
    topic: str,
    key: str | None,
    tag: str | None,
    bootstrap: str,
    begin: str | None,
    end: str | None,
    index: Path | None,
    timeout: float,
) -> None:
    """TOPIC's messages in the window, by key or tag (all of the window's without either)."""
    found, life = _search(bootstrap, begin, end, timeout, index).query(topic, key, tag)
    rows = query_rows(found)
    if rows:
        click.echo("\n".join(table(QUERY_HEADER, rows, indent="")))
    click.echo(f"{plural(len(rows), 'message')} found; {life.summary()[1:-1]}")
