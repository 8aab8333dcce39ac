"""The brokers' clocks as the forwarder sees them: who stamps SCHEDULE, and how far ahead.

Not in RocketMQ, whose broker stores and schedules on one host and one clock. Here a record's
store time is stamped by its partition leader (``message.timestamp.type=LogAppendTime``) and
its due time is judged on the forwarder's clock (:mod:`adapter.schedule.due`). So:

- at start the forwarder refuses a SCHEDULE topic whose records the writers stamp themselves
  (``CreateTime``, a topic made by hand): a client-chosen time would make a record due early.
  Records stamped otherwise anyway (the config changed later) are counted from their read;
- a stamp ahead of the forwarder's clock shows a skew (the leader ahead, or the forwarder's
  clock behind): ``rmq_schedule_broker_clock_ahead_seconds{level}`` holds the latest per level,
  and a warning names it (at most one per 30 s) once it passes :data:`WARN_AHEAD_MS`.

Known gaps: a leader behind the forwarder cannot be seen from its stamps (it looks like a
record read late); see :mod:`adapter.schedule.due`. A principal without DESCRIBE_CONFIGS on
SCHEDULE cannot check the stamp type at start: the forwarder says so and relies on each
record's own timestamp type.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from adapter import naming
from adapter.exceptions import TopicLayoutError
from adapter.kafka import clients
from adapter.kafka.topics import LOG_APPEND_TIME, describe_configs
from adapter.logs import RepeatLimiter

SCHEDULE = naming.kafka_topic(naming.SCHEDULE_TOPIC)
TIMESTAMP_TYPE = "message.timestamp.type"
WARN_AHEAD_MS = 100
"""A stamp further ahead than this is a clock skew worth a warning (NTP keeps hosts within
1-10 ms)."""
_NOT_ALLOWED = frozenset(
    {KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED}
)


def require_broker_stamps(conf: Mapping[str, Any], timeout_s: float, log: logging.Logger) -> None:
    """Refuse (:class:`TopicLayoutError`) a SCHEDULE topic whose store time is not the
    broker's LogAppendTime; only warn when the principal may not read its configuration."""
    admin = clients.admin(dict(conf))
    try:
        kind = describe_configs(admin, [SCHEDULE], timeout_s)[SCHEDULE].get(TIMESTAMP_TYPE)
    except KafkaException as exc:
        if exc.args[0].code() not in _NOT_ALLOWED:
            raise
        log.warning(
            "cannot read the configuration of %s (%s): grant DESCRIBE_CONFIGS on it to check "
            "that the broker stamps its records; a record not stamped by the broker counts its "
            "delay from when it is read",
            naming.SCHEDULE_TOPIC,
            exc.args[0].str(),
        )
        return
    wanted = LOG_APPEND_TIME[TIMESTAMP_TYPE]
    if kind != wanted:
        raise TopicLayoutError(
            f"{naming.SCHEDULE_TOPIC} has {TIMESTAMP_TYPE}={kind}: its store times would be "
            f"chosen by the writers, and a delayed message could fall due at once. Set "
            f"{TIMESTAMP_TYPE}={wanted} on it (kafka-configs.sh --alter), as "
            "`rmq-adapter topics init` creates it",
            topic=SCHEDULE,
        )


class AheadWatch:
    """Reports how far the broker's store stamps lie ahead of the forwarder's clock."""

    def __init__(self, gauge: Any, log: logging.Logger, monotonic: Callable[[], float]) -> None:
        self._gauge = gauge
        self._log = log
        self._limiter = RepeatLimiter(30.0, monotonic)

    def saw(self, level: str, ahead_ms: int) -> None:
        """A record of ``level`` stamped ``ahead_ms`` ahead of the forwarder's clock (0: not)."""
        self._gauge.labels(level).set(ahead_ms / 1000)
        if ahead_ms <= WARN_AHEAD_MS:
            return
        held = self._limiter.admit("ahead")
        if held is not None:
            more = f" ({held} more like it in the last 30 s)" if held else ""
            self._log.warning(
                "level %s: a record's store time is %d ms ahead of this forwarder's clock: the "
                "broker's clock runs ahead, or this host's behind; it falls due one delay after "
                "its store time by this clock, late by the skew. Check NTP on both%s",
                level,
                ahead_ms,
                more,
            )
