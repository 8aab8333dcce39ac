"""Every confluent-kafka client the adapter creates, made here: quiet, logged, and probed.

Not a RocketMQ behaviour. librdkafka writes its own log lines (``%3|...|FAIL|...``) straight to
standard error unless a client has a ``logger``; each client made here has one, which turns
those lines into Python log records (``adapter.librdkafka``, JSON in the workers) at the level
the user set, holds back repeats per client and per line (:class:`adapter.logs.RepeatLimiter`),
and remembers the last error, so that a failed call can say why (:func:`reach`).

Known gaps: librdkafka's lines are served by ``poll()``; a client that is never polled (an
admin client between calls) drops them instead of printing them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ClusterMetadata

from adapter.exceptions import KafkaUnavailableError
from adapter.logs import RepeatLimiter, shape

LOG = logging.getLogger("adapter.librdkafka")
REPEAT_WINDOW_S = 30.0

# Python level -> librdkafka's syslog level, so librdkafka does not even format what is dropped.
_SYSLOG = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3}


class LibrdkafkaLog:
    """The ``logger`` of one client. confluent-kafka calls ``log(level, "%s [%s] %s", facility,
    client name, text)`` from ``poll()``."""

    def __init__(self, window_s: float = REPEAT_WINDOW_S) -> None:
        self._limiter = RepeatLimiter(window_s)
        self.last_error: str | None = None

    def log(self, level: int, fmt: str, *args: Any) -> None:
        if len(args) == 3:
            facility, client, text = (str(a) for a in args)
        else:
            facility, client, text = "", "", fmt % args if args else fmt
        if level >= logging.ERROR:
            self.last_error = text
        if not LOG.isEnabledFor(level):
            return
        held = self._limiter.admit((facility, shape(text)))
        if held is None:
            return
        if held:
            text = f"{text} ({held} more like it in the last {self._limiter.window_s:.0f} s)"
        LOG.log(level, "%s", text, extra={"client": client, "facility": facility})


def _conf(conf: Mapping[str, Any], log: LibrdkafkaLog) -> dict[str, Any]:
    level = LOG.getEffectiveLevel()
    syslog = next((v for k, v in sorted(_SYSLOG.items()) if level <= k), 2)
    return {"log_level": syslog, **conf, "logger": log}


def producer(conf: Mapping[str, Any], log: LibrdkafkaLog | None = None) -> Producer:
    return Producer(_conf(conf, log or LibrdkafkaLog()))


def consumer(conf: Mapping[str, Any], log: LibrdkafkaLog | None = None) -> Consumer:
    return Consumer(_conf(conf, log or LibrdkafkaLog()))


def admin(conf: Mapping[str, Any], log: LibrdkafkaLog | None = None) -> AdminClient:
    return AdminClient(_conf(conf, log or LibrdkafkaLog()))


def reach(conf: Mapping[str, Any], timeout_s: float) -> ClusterMetadata:
    """The cluster's metadata, or :class:`KafkaUnavailableError` naming the address and the
    cause (librdkafka's last error, e.g. "Connect to ipv4#127.0.0.1:1 failed: Connection
    refused") once ``timeout_s`` has passed."""
    log = LibrdkafkaLog()
    client = admin(conf, log)
    try:
        metadata = client.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        client.poll(0)  # serve the log lines that say why
        raise unavailable(conf, log.last_error or exc.args[0].str(), timeout_s) from exc
    if not metadata.brokers:
        raise unavailable(conf, "no broker answered", timeout_s)
    return metadata


def unavailable(conf: Mapping[str, Any], cause: str, timeout_s: float) -> KafkaUnavailableError:
    address = conf.get("bootstrap.servers", "(no bootstrap servers)")
    return KafkaUnavailableError(f"cannot reach Kafka at {address} within {timeout_s:g} s: {cause}")
