"""The schemas topic: how producers and workers of two releases learn each other's schemas.

Reproduces no RocketMQ behaviour: a RocketMQ broker's internal records never cross versions.
Here, during a rolling upgrade, an application of one release and the workers of another share
the system topics. Each process that writes or reads them publishes the ``.avsc`` text of its
record schemas to ``RMQ_SYS_SCHEMAS`` (compacted, keyed by fingerprint) once per cluster, and a
producer starts only once that is acknowledged (or :data:`START_WAIT_S` passed), so a reader
finds a writer's schema there before it meets the writer's first record. A reader that meets a
fingerprint it does not know asks the schemas topic of the cluster it read the record from
(:func:`lookup_for`), and reads it again only when it has grown, so a stream of garbage costs
one offset query per record; a schemas topic that cannot be read is not asked again for
:data:`FAILED_LOOKUP_PAUSE_S`. What it finds is learned only if it follows the evolution rule
(:mod:`adapter.wire.evolution`).

Known gaps: publishing is best effort. A record whose schema never reached the topic (its
writer could not write there, or the topic does not exist: run ``rmq-adapter topics init``) is
parked as an unknown schema, and is not re-driven when the schema turns up later.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from adapter import naming
from adapter.clock import SYSTEM_CLOCK, Clock
from adapter.config import KafkaSettings
from adapter.kafka import clients, reading
from adapter.wire import codec
from adapter.wire.records import RECORD_TYPES

__all__ = ["SCHEMAS", "START_WAIT_S", "SchemaTopic", "publish", "install", "lookup_for"]

log = logging.getLogger(__name__)

SCHEMAS = naming.kafka_topic(naming.SCHEMAS_TOPIC)
START_WAIT_S = 3.0
"""How long a producer's start waits for its schemas to be acknowledged."""
_TIMEOUT_S = 10.0
_LOOKUP_TIMEOUT_S = 3.0
FAILED_LOOKUP_PAUSE_S = 30.0
"""A schemas topic that could not be read is not asked again for this long."""


def _exists(conf: dict[str, Any], timeout_s: float = _TIMEOUT_S) -> bool:
    # All topics, never one by name: naming a missing topic would auto-create it uncompacted.
    admin = clients.admin(conf)
    return SCHEMAS in admin.list_topics(timeout=timeout_s).topics


def publish(kafka: KafkaSettings, *, again: bool = False) -> bool:
    """Write this version's schemas to the schemas topic; False (logged) when it cannot. A
    missing topic is news once: ``again`` (a retry, e.g. a worker's next turn before ``topics
    init``) says it at debug level only."""
    conf = kafka.librdkafka({})
    try:
        if not _exists(conf):
            level = logging.DEBUG if again else logging.INFO
            log.log(level, "no %s topic: schemas not published", naming.SCHEMAS_TOPIC)
            return False
        producer = clients.producer({**conf, "message.timeout.ms": int(_TIMEOUT_S * 1000)})
        failures: list[str] = []
        for cls in RECORD_TYPES:
            producer.produce(
                SCHEMAS,
                codec.schema_text(cls).encode(),
                key=codec.fingerprint(cls).hex().encode(),
                on_delivery=lambda e, _m: failures.append(str(e)) if e is not None else None,
            )
        if producer.flush(_TIMEOUT_S) or failures:
            log.warning("schemas not published to %s: %s", naming.SCHEMAS_TOPIC, failures[:1])
            return False
    except KafkaException as exc:
        # Kafka is away: whoever needs it says so; this is no news of its own.
        log.debug("schemas not published to %s: %s", naming.SCHEMAS_TOPIC, exc)
        return False
    return True


@dataclass(eq=False)
class SchemaTopic:
    """A schema lookup for :func:`adapter.wire.codec.decode_as`: the schemas topic of one
    cluster, read again when asked for an unknown fingerprint and the topic has grown."""

    kafka: KafkaSettings
    clock: Clock = SYSTEM_CLOCK
    _known: dict[bytes, str] = field(default_factory=dict)
    _reader: Consumer | None = None
    _read_to: int = 0
    _paused_until: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, fingerprint: bytes) -> str | None:
        with self._lock:
            if fingerprint not in self._known and self.clock.monotonic() >= self._paused_until:
                try:
                    self._catch_up()
                except KafkaException as exc:
                    self._paused_until = self.clock.monotonic() + FAILED_LOOKUP_PAUSE_S
                    log.warning("cannot read %s: %s", naming.SCHEMAS_TOPIC, exc)
            return self._known.get(fingerprint)

    def _catch_up(self) -> None:
        if self._reader is None:
            conf = self.kafka.librdkafka({})
            if not _exists(conf, _LOOKUP_TIMEOUT_S):
                return
            self._reader = clients.consumer(
                {"group.id": "rmq-adapter-schemas", **conf, **reading.READER_SETTINGS}
            )
            self._reader.assign([TopicPartition(SCHEMAS, 0, 0)])
        reader = self._reader
        _, end = reader.get_watermark_offsets(TopicPartition(SCHEMAS, 0), timeout=_LOOKUP_TIMEOUT_S)
        deadline = self.clock.monotonic() + _LOOKUP_TIMEOUT_S
        while self._read_to < end and self.clock.monotonic() < deadline:
            record = reader.poll(0.2)
            if record is None:
                continue
            error = record.error()
            if error is not None:
                if error.code() != KafkaError._PARTITION_EOF:
                    raise KafkaException(error)
                self._read_to = max(self._read_to, record.offset() or 0)
                continue
            self._read_to = (record.offset() or 0) + 1
            key, value = record.key(), record.value()
            try:
                if key and value:
                    self._known[bytes.fromhex(key.decode("ascii"))] = value.decode("utf-8")
            except ValueError:
                log.warning("%s holds a record that is not a schema", naming.SCHEMAS_TOPIC)


@dataclass(eq=False)
class _Publication:
    done: threading.Event = field(default_factory=threading.Event)
    ok: bool = False


_publications: dict[str, _Publication] = {}
_install_lock = threading.Lock()


def install(kafka: KafkaSettings) -> threading.Event:
    """Once per process and cluster: publish this version's schemas in the background (again
    at the next call after an attempt that did not succeed, e.g. before ``topics init`` made
    the topic). The event is set once the attempt is over, acknowledged or not."""
    with _install_lock:
        last = _publications.get(kafka.bootstrap_servers)
        if last is not None and (last.ok or not last.done.is_set()):
            return last.done
        attempt = _publications[kafka.bootstrap_servers] = _Publication()

    def run() -> None:
        try:
            attempt.ok = publish(kafka, again=last is not None)
        finally:
            attempt.done.set()

    threading.Thread(target=run, name="publish-schemas", daemon=True).start()
    return attempt.done


_lookups: dict[str, SchemaTopic] = {}


def lookup_for(kafka: KafkaSettings) -> SchemaTopic:
    """The schema lookup of the cluster ``kafka`` names (one per process and cluster)."""
    with _install_lock:
        found = _lookups.get(kafka.bootstrap_servers)
        if found is None:
            found = _lookups[kafka.bootstrap_servers] = SchemaTopic(kafka)
        return found
