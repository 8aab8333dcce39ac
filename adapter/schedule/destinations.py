"""Where the forwarder refuses to deliver: destinations no application may reach through it.

RocketMQ's broker refuses a client's send to its system topics (``NOT_ALLOWED_SEND_TOPIC_SET``)
and writes a consumer's send-back to its group's retry topic itself. Here the forwarder
delivers what any principal with WRITE on ``SCHEDULE_TOPIC_XXXX`` wrote there, with the
workers' own, broader permissions; so it refuses, and parks with reason ``refused
destination``, a record addressed to:

- a system topic of the adapter (``RMQ_SYS_*``, ``SCHEDULE_TOPIC_XXXX``, ...) or of Kafka
  (``__consumer_offsets``, ``__transaction_state``, any ``__`` name);
- a ``%CHECK%`` topic: it takes the coordinator's check requests only, and a forged one would
  make another group's producers run their checker on a message of the writer's choosing;
- a ``%DLQ%`` topic: consumers write their group's dead letters directly, never through it;
- a ``%RETRY%`` topic, unless the record is a consumer's send-back (``reconsume_times`` of 1
  or more, and the original topic in ``RETRY_TOPIC``).

Known gaps: Kafka never tells a consumer which principal wrote a record, so without the
schedule grants (:mod:`adapter.schedule.grants`, signed records) any principal that may write
SCHEDULE can have the workers deliver to any topic they may write, and can forge a send-back
into any group's retry topic (docs/production.md).
"""

from __future__ import annotations

from adapter import naming
from adapter import properties as prop
from adapter.wire.records import ScheduledMessage

KAFKA_INTERNAL_PREFIX = "__"


def refused_destination(record: ScheduledMessage) -> str | None:
    """Why the forwarder must not deliver ``record`` to its real topic; None when it may.
    The record is parked with ``refused destination: <why>``."""
    topic = record.topic
    if naming.is_system_topic(topic):
        return f"{topic!r} is a system topic"
    if topic.startswith(KAFKA_INTERNAL_PREFIX):
        return f"{topic!r} is a Kafka internal topic"
    if topic.startswith(naming.CHECK_PREFIX):
        return f"{topic!r} takes the coordinator's check requests only"
    if topic.startswith(naming.DLQ_PREFIX):
        return f"{topic!r} takes its group's dead letters only"
    if topic.startswith(naming.RETRY_PREFIX) and not (
        record.reconsume_times >= 1 and prop.RETRY_TOPIC in record.properties
    ):
        return f"{topic!r} takes its group's send-backs only"
    return None
