"""The lite topics' progress and owners in Kafka: one compacted topic for every group.

Per (consumer group, lite topic), in ``RMQ_SYS_LITE_PROGRESS`` (one partition, compacted, made by
the first ``LitePushConsumer``), two records: its progress, keyed ``<group>/<lite topic>`` (neither
name can hold ``/``) and valued ``<partition>:<next offset>``; and its owner, keyed
``<group>/<lite topic>/owner`` and valued the owning consumer's client id. Compaction keeps the
latest of each, so a million lite topics cost two small records each and no Kafka topic or
partition of their own.

:func:`load` reads a group's progress at startup; :class:`ProgressWriter` saves what moved,
about once a second and at shutdown (after a crash, what was consumed since is delivered again:
at least once, as RocketMQ's consumers), and writes a claim when a consumer subscribes. A lite
subscription is exclusive within its group, as in RocketMQ: the latest claim in the topic's
order owns the lite topic, and every consumer of the group, reading the topic on, drops a lite
topic whose later claim is another's (RocketMQ's broker notifies the previous owner).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

from adapter import naming
from adapter.exceptions import KafkaUnavailableError
from adapter.kafka import clients
from adapter.kafka.topics import COMPACTED, ensure_single_queue_topic
from adapter.v5.lite_book import Progress

__all__ = ["ProgressWriter", "ensure_topic", "load"]

log = logging.getLogger(__name__)

TOPIC = naming.LITE_PROGRESS_TOPIC


def ensure_topic(conf: Mapping[str, Any], timeout_s: float) -> None:
    ensure_single_queue_topic(clients.admin(dict(conf)), TOPIC, timeout_s, COMPACTED)


OWNER_SUFFIX = "/owner"


def key(group: str, lite: str) -> bytes:
    return f"{group}/{lite}".encode()


def owner_key(group: str, lite: str) -> bytes:
    return f"{group}/{lite}{OWNER_SUFFIX}".encode()


def claimed(group: str, record_key: bytes | None) -> str | None:
    """The lite topic a record of the topic claims for ``group``, if it is such a claim."""
    prefix = f"{group}/".encode()
    name = record_key or b""
    if not (name.startswith(prefix) and name.endswith(OWNER_SUFFIX.encode())):
        return None
    return name[len(prefix) : -len(OWNER_SUFFIX)].decode(errors="replace")


def parse(value: bytes | None) -> Progress | None:
    """A saved progress, or None for a record that is not one."""
    try:
        partition, offset = (value or b"").decode().split(":")
        return Progress(int(partition), int(offset))
    except ValueError:
        return None


def load(conf: Mapping[str, Any], group: str, timeout_s: float) -> tuple[dict[str, Progress], int]:
    """Every lite topic's saved progress of ``group``, and the topic's end it was read to (from
    there on a consumer reads the claims); ``KafkaUnavailableError`` past ``timeout_s``."""
    reader = clients.consumer(
        {**conf, "group.id": f"{group}%lite-progress", "enable.auto.commit": False,
         "isolation.level": "read_committed"}
    )  # fmt: skip
    prefix = f"{group}/".encode()
    found: dict[str, Progress] = {}
    try:
        _low, end = reader.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=timeout_s)
        if end <= 0:
            return found, 0
        reader.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
        position = 0
        while position < end:
            batch = reader.consume(1000, timeout=timeout_s)
            if not batch:
                raise KafkaUnavailableError(
                    f"reading {TOPIC} stopped at offset {position} of {end} for {timeout_s:g} s"
                )
            for record in batch:
                if record.error() is not None:
                    continue
                position = int(record.offset() or 0) + 1
                name = record.key() or b""
                if name.startswith(prefix) and claimed(group, name) is None:
                    progress = parse(record.value())
                    if progress is not None:
                        found[name[len(prefix) :].decode()] = progress
    except KafkaException as exc:
        raise KafkaUnavailableError(f"cannot read {TOPIC}: {exc.args[0].str()}") from exc
    finally:
        reader.close()
    return found, int(end)


class ProgressWriter:
    """Saves a group's lite topics' progress (idempotent producer, acks from all replicas)."""

    def __init__(self, conf: Mapping[str, Any], group: str) -> None:
        self._group = group
        self._producer = clients.producer({**conf, "enable.idempotence": True, "linger.ms": 20})

    def save(self, moved: Mapping[str, Progress], timeout_s: float) -> bool:
        """Write ``moved`` and wait up to ``timeout_s``; whether all of it was written."""
        for lite, where in moved.items():
            value = f"{where.partition}:{where.next}".encode()
            self._producer.produce(TOPIC, value, key(self._group, lite))
        left = self._producer.flush(timeout_s)
        if left:
            log.warning("group %s: %d lite progress records not saved yet", self._group, left)
        return left == 0

    def claim(self, lite: str, client_id: str, timeout_s: float) -> int:
        """Write ``client_id``'s claim of ``lite`` and wait for it: its offset in the topic
        (``KafkaUnavailableError`` when it was not written within ``timeout_s``)."""
        written: list[int] = []

        def delivered(error: Any, record: Any) -> None:
            if error is None:
                written.append(int(record.offset()))

        self._producer.produce(
            TOPIC, client_id.encode(), owner_key(self._group, lite), on_delivery=delivered
        )
        self._producer.flush(timeout_s)
        if not written:
            raise KafkaUnavailableError(
                f"could not claim lite topic {lite!r} within {timeout_s:g} s"
            )
        return written[0]

    def close(self, timeout_s: float) -> None:
        self._producer.flush(timeout_s)
