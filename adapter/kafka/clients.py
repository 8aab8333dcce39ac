"""Every confluent-kafka client the adapter creates, made here: quiet, logged, and probed.

Not a RocketMQ behaviour. librdkafka writes its own log lines (``%3|...|FAIL|...``) straight to
standard error unless a client has a ``logger``; each client made here has one, which turns
those lines into Python log records (``adapter.librdkafka``, JSON in the workers) at the level
the user set, without librdkafka's ``[thrd:...]`` prefix (kept as ``thread_name``), holds back
repeats of a line (:class:`adapter.logs.RepeatLimiter`, one for the process, so that clients
failing alike make one line), and remembers the last error, so that a failed call can say why
(:func:`reach`). The logger has a ``NullHandler``, as a library's should: an application that
has not set up Python logging sees none of these lines (Python would print them on standard
error), as RocketMQ's clients write theirs to their own files; one that has gets them at their
levels.

Known gaps: librdkafka's lines are served by ``poll()``; a client that is never polled (an
admin client between calls) drops them instead of printing them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, ClusterMetadata

from adapter.exceptions import KafkaUnavailableError
from adapter.logs import RepeatLimiter, shape

LOG = logging.getLogger("adapter.librdkafka")
"""librdkafka's own lines. Named for the library whose lines it carries, not for this module (as
every other logger of the package is): an operator raises or silences librdkafka's lines alone
by this name, wherever in the package the client was made."""
LOG.addHandler(logging.NullHandler())
REPEAT_WINDOW_S = 30.0

# librdkafka backs off up to 10 s between reconnection attempts; after a broker restart that
# would leave a client idle for up to 10 s more. 1 s keeps recovery prompt at little cost.
_RECONNECT = {"reconnect.backoff.ms": 100, "reconnect.backoff.max.ms": 1000}

# Python level -> librdkafka's syslog level, so librdkafka does not even format what is dropped.
_SYSLOG = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3}


REPEATS = RepeatLimiter(REPEAT_WINDOW_S)
"""One for the process, as its log stream is one: the producer, consumer and admin client of a
worker that all fail to connect make one line, not three."""


class LibrdkafkaLog:
    """The ``logger`` of one client. confluent-kafka calls ``log(level, "%s [%s] %s", facility,
    client name, text)`` from ``poll()``.

    librdkafka's informational lines (connections opened and closed) are DEBUG, and a warning it
    is handling itself ("..., retrying") is INFO. Its other warnings and
    errors are shown (``announce``) for the clients of an application, whose only sign of
    trouble they are; the workers and the commands report trouble themselves (once per change,
    with the cause, which :attr:`last_error` keeps), so for them these lines are DEBUG too."""

    def __init__(self, *, announce: bool = False, limiter: RepeatLimiter = REPEATS) -> None:
        self._announce = announce
        self._limiter = limiter
        self.last_error: str | None = None

    def log(self, level: int, fmt: str, *args: Any) -> None:
        if len(args) == 3:
            facility, client, text = (str(a) for a in args)
        else:
            facility, client, text = "", "", fmt % args if args else fmt
        thread, text = _thread_of(text)
        if level >= logging.ERROR:
            self.last_error = text
        if level < logging.WARNING or not self._announce:
            level = logging.DEBUG
        elif level == logging.WARNING and text.endswith("retrying"):
            level = logging.INFO  # a transient state librdkafka is handling (a coordinator loading)
        elif level == logging.WARNING and _PREVIEW in text:
            level = logging.INFO  # known and documented (docs/v5.md, the SimpleConsumer)
        if not LOG.isEnabledFor(level):
            return
        held = self._limiter.admit((facility, shape(_without_place(text))))
        if held is None:
            return
        if held:
            text = f"{text} ({held} more like it in the last {self._limiter.window_s:.0f} s)"
        extra = {"client": client, "facility": facility, "thread_name": thread}
        LOG.log(level, "%s", text, extra=extra)


_PLACE = re.compile(r"^(\[thrd:[^\]]*\]: )?(\S+/\S*: )?|\s*\(after .*$")
_THREAD = re.compile(r"^\[thrd:([^\]]*)\]: ")
_PREVIEW = 'share consumer is in "Preview"'


def _thread_of(text: str) -> tuple[str, str]:
    """librdkafka's thread (``main``, ``host:port/id``) and the line without it."""
    found = _THREAD.match(text)
    return (found.group(1), text[found.end() :]) if found else ("", text)


def _without_place(text: str) -> str:
    """A librdkafka line without its thread, broker and trailing note: the failures of one
    kind at several brokers or connections read as one."""
    return _PLACE.sub("", text)


def _conf(conf: Mapping[str, Any], log: LibrdkafkaLog) -> dict[str, Any]:
    level = LOG.getEffectiveLevel()
    syslog = next((v for k, v in sorted(_SYSLOG.items()) if level <= k), 2)
    return {"log_level": syslog, **_RECONNECT, **conf, "logger": log}


def producer(
    conf: Mapping[str, Any], log: LibrdkafkaLog | None = None, *, announce: bool = False
) -> Producer:
    return Producer(_conf(conf, log or LibrdkafkaLog(announce=announce)))


def consumer(
    conf: Mapping[str, Any], log: LibrdkafkaLog | None = None, *, announce: bool = False
) -> Consumer:
    return Consumer(_conf(conf, log or LibrdkafkaLog(announce=announce)))


def share_consumer(
    conf: Mapping[str, Any], log: LibrdkafkaLog | None = None, *, announce: bool = False
) -> ShareConsumer:
    """A member of a share group (KIP-932), as the 5.x ``SimpleConsumer`` uses them."""
    return ShareConsumer(_conf(conf, log or LibrdkafkaLog(announce=announce)))


def admin(
    conf: Mapping[str, Any], log: LibrdkafkaLog | None = None, *, announce: bool = False
) -> AdminClient:
    return AdminClient(_conf(conf, log or LibrdkafkaLog(announce=announce)))


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
    if _CONTROLLER_ANSWERED in cause:
        return KafkaUnavailableError(
            f"{address} is a KRaft controller's port, not a broker's: controllers answer Kafka "
            "clients only that they do not serve them (Required feature not supported by "
            "broker); give a broker's listener (`rmq-adapter broker start` prints it: the "
            "controller has the next port)"
        )
    return KafkaUnavailableError(f"cannot reach Kafka at {address} within {timeout_s:g} s: {cause}")


_CONTROLLER_ANSWERED = "Required feature not supported by broker"
"""What librdkafka says of a metadata request a KRaft controller's listener refuses."""
