"""The coordinator's search for a direct commit: is the message in its queue already?

A COMMIT the coordinator applies to a half message its producer may have appended directly
(``Commit.search``, :mod:`adapter.transaction.direct`) comes with a search of the message's
queue, done before the turn's Kafka transaction begins (a record of that transaction on the
same queue would hold the search's read_committed reader back): from the first offset stamped
at or after the half message's born time (the direct append's stamp; for a message an operator
resumed, its original born time) to the queue's end as it
was when the search began, for a record whose ``UNIQ_KEY`` is the transaction id. Found, the
COMMIT records the message as delivered by its producer; not found, the coordinator delivers
it. The state applies such a COMMIT only once every direct append of the message has landed
and is readable, so the answer is final.

Known gaps: a search reads every record of the queue since the born time; it is taken only
when a producer died or was cut off between its append and its END.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from adapter import naming
from adapter import properties as prop
from adapter.clock import Clock
from adapter.kafka import clients, reading
from adapter.transaction.actions import Action, Commit
from adapter.wire import codec
from adapter.wire.records import HalfMessage

__all__ = ["copy_in_queue", "settle_searches"]

log = logging.getLogger(__name__)

_SEARCH_GROUP = "rmq-adapter-direct-search"
"""The group id librdkafka requires of a consumer; nothing is ever committed with it."""


def settle_searches(
    actions: list[tuple[int, Action[bytes]]],
    conf: Mapping[str, Any],
    timeout_s: float,
    clock: Clock,
) -> None:
    """Search the queue of each COMMIT in ``actions`` that asks for it, and replace it with
    one that knows the answer (``delivered`` when the producer's copy is there)."""
    for index, (partition, action) in enumerate(actions):
        if not isinstance(action, Commit) or not action.search:
            continue
        half = codec.decode_as(HalfMessage, action.pending.payload, canonical=False)
        found = copy_in_queue(conf, half, timeout_s, clock)
        log.info(
            "transaction %s committed by a check or another process: its producer's direct "
            "append %s in %s queue %d",
            half.transaction_id,
            "is" if found else "is not (delivering it now)",
            half.topic,
            half.queue_id,
            extra={"msg_id": half.transaction_id},
        )
        actions[index] = (partition, dataclasses.replace(action, delivered=found, search=False))


def copy_in_queue(
    conf: Mapping[str, Any], half: HalfMessage, timeout_s: float, clock: Clock
) -> bool:
    """Whether ``half``'s queue holds a committed record with its transaction id, stamped at or
    after its born time; False when the topic or the queue does not exist (the commit then
    parks it, as any commit to a missing topic)."""
    topic = naming.kafka_topic(half.topic)
    if half.queue_id < 0:
        return False  # a direct half message always names its queue
    probe = clients.consumer({"group.id": _SEARCH_GROUP, **conf, "enable.auto.commit": False})
    try:
        wanted = TopicPartition(topic, half.queue_id, _stamped_ms(half))
        [start] = probe.offsets_for_times([wanted], timeout=timeout_s)
    except KafkaException as exc:
        if _missing(exc.args[0] if exc.args else None):
            return False
        raise
    finally:
        probe.close()
    if start.error is not None:
        if _missing(start.error):
            return False
        raise KafkaException(start.error)
    if start.offset < 0:
        return False  # nothing stamped at or after the born time
    records = reading.read_to_end(conf, topic, {half.queue_id: start.offset}, timeout_s, clock)
    with contextlib.closing(records):
        for record in records:
            if reading.header_text(record, prop.UNIQ_KEY) == half.transaction_id:
                return True
    return False


def _stamped_ms(half: HalfMessage) -> int:
    """The stamp of ``half``'s direct append: its born time, or, for a message an operator
    resumed (born again), the original born time it keeps in ``BORN_TIMESTAMP``."""
    original = half.properties.get(prop.BORN_TIMESTAMP, "")
    return min(half.born_timestamp, int(original)) if original.isdecimal() else half.born_timestamp


def _missing(error: Any) -> bool:
    codes = (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION)
    return isinstance(error, KafkaError) and error.code() in codes
