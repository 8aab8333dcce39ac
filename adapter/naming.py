"""Every topic and group name the adapter uses, and the one place where they meet Kafka.

Reproduces RocketMQ's naming: the system topics (``RMQ_SYS_TRANS_HALF_TOPIC``,
``SCHEDULE_TOPIC_XXXX``, ...), the per-group retry and dead-letter topics (``%RETRY%<group>``,
``%DLQ%<group>``) and the validation rules of ``TopicValidator``/``Validators`` (characters
``[%|a-zA-Z0-9_-]``, topics up to 127 characters, groups up to 255).

Kafka forbids ``%`` and ``|`` in topic names, and RocketMQ forbids ``.``, so ``.`` is free to
act as an escape character: ``%`` becomes ``.25`` and ``|`` becomes ``.7C`` (their hex codes,
as in URL encoding). The mapping is reversible and is applied here only. Group ids are
Kafka-legal as they are and are not encoded.

A RocketMQ namespace (``NamespaceUtil``) prefixes a topic or group as ``<namespace>%<name>``;
a group's retry and dead-letter topics then read ``%RETRY%<namespace>%<group>``; system topics
are never prefixed (:func:`with_namespace`, :func:`split_namespace`).

A topic made for priorities (RIP-80) keeps priority 0, and messages without one, in its own
Kafka topic; each higher band ``k`` is a Kafka topic of its own, ``<kafka topic>.priority-<k>``
(:func:`priority_topic`, :func:`priority_bands`). The ``.`` keeps these names out of every
name an application can give, and no ``.`` precedes the digits, so :func:`decode` leaves them
be; :func:`topic_of` gives a band's record the name of its topic.

Known gaps: a Kafka topic that holds ``.`` but was not written by the adapter decodes to a
name RocketMQ itself could not have. Kafka refuses a topic whose name differs from an existing
one only by ``.`` against ``_`` (their metrics collide): a band ``T.priority-2`` and a user's
topic ``T_priority-2`` cannot both exist.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

from adapter.exceptions import InvalidNameError

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_END_TOPIC = "RMQ_SYS_TRANS_END_TOPIC"
TRANS_OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
POISON_TOPIC = "RMQ_SYS_POISON_TOPIC"
"""Where a system-topic record that cannot be decoded or delivered is parked, with the reason."""
TIMER_RECALL_TOPIC = "RMQ_SYS_TIMER_RECALL"
"""Recalls of timer messages, and the markers of their deliveries (``adapter.schedule.recall``)."""
SCHEMAS_TOPIC = "RMQ_SYS_SCHEMAS"
"""The record schemas of every release in use, keyed by fingerprint (schema evolution)."""
LITE_PROGRESS_TOPIC = "RMQ_SYS_LITE_PROGRESS"
"""Where each consumer group stands in each lite topic it consumed (compacted; made by the first
``LitePushConsumer``)."""

TRANS_COORDINATOR_GROUP = "CID_RMQ_SYS_TRANS"
SCHEDULE_FORWARDER_GROUP = "CID_RMQ_SYS_SCHEDULE"

RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
CHECK_PREFIX = "%CHECK%"

SYSTEM_TOPICS = frozenset(
    {
        SCHEDULE_TOPIC,
        TRANS_HALF_TOPIC,
        TRANS_END_TOPIC,
        TRANS_OP_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        POISON_TOPIC,
        TIMER_RECALL_TOPIC,
        SCHEMAS_TOPIC,
        LITE_PROGRESS_TOPIC,
    }
)
"""Topics a user producer may not send to (RocketMQ's ``NOT_ALLOWED_SEND_TOPIC_SET``)."""
SYSTEM_PREFIX = "RMQ_SYS_"
"""Every topic of the adapter's own starts so, those of later releases too."""

TOPIC_MAX_LENGTH = 127
GROUP_MAX_LENGTH = 255
KAFKA_TOPIC_MAX_LENGTH = 249

_VALID = re.compile(r"^[%|a-zA-Z0-9_-]+$")
_ESCAPES = {"%": ".25", "|": ".7C"}
_UNESCAPES = {code[1:]: char for char, code in _ESCAPES.items()}
_ENCODE_TABLE = str.maketrans(_ESCAPES)
_ESCAPED = re.compile(r"\.(25|7C)")


def encode(name: str) -> str:
    """The Kafka topic name for a RocketMQ topic name (``%`` -> ``.25``, ``|`` -> ``.7C``)."""
    return name.translate(_ENCODE_TABLE)


def decode(kafka_name: str) -> str:
    """The RocketMQ topic name for a Kafka topic name; the inverse of :func:`encode`."""
    if "." not in kafka_name:
        return kafka_name
    return _ESCAPED.sub(lambda m: _UNESCAPES[m.group(1)], kafka_name)


def topic_of(kafka_name: str) -> str:
    """The RocketMQ topic a record of ``kafka_name`` belongs to: :func:`decode`, and for a
    priority band's Kafka topic the name of its topic."""
    base, infix, band = kafka_name.rpartition(PRIORITY_INFIX)
    return decode(base if infix and _is_band(band) else kafka_name)


def _check_characters(kind: str, name: object, max_length: int) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidNameError(f"the specified {kind} is blank")
    if not _VALID.match(name):
        raise InvalidNameError(
            f"the specified {kind} [{name}] contains illegal characters, "
            r"allowing only ^[%|a-zA-Z0-9_-]+$"
        )
    if len(name) > max_length:
        raise InvalidNameError(
            f"the specified {kind} [{name[:40]}...] is longer than the {kind} max length "
            f"{max_length}"
        )
    return name


@lru_cache(maxsize=4096)
def kafka_topic(topic: str) -> str:
    """Validate a RocketMQ topic name and return its Kafka name. Cached: it is on the hot path."""
    _check_characters("topic", topic, TOPIC_MAX_LENGTH)
    encoded = encode(topic)
    if len(encoded) > KAFKA_TOPIC_MAX_LENGTH:
        raise InvalidNameError(
            f"the topic [{topic[:40]}...] is {len(encoded)} characters once encoded for Kafka; "
            f"Kafka allows {KAFKA_TOPIC_MAX_LENGTH} (each % or | takes 3)",
            topic=topic,
        )
    return encoded


@lru_cache(maxsize=4096)
def sendable_kafka_topic(topic: str) -> str:
    """Like :func:`kafka_topic`, and refuses the system topics, as RocketMQ's producer does."""
    if topic in SYSTEM_TOPICS:
        raise InvalidNameError(f"Sending message to topic[{topic}] is forbidden.", topic=topic)
    return kafka_topic(topic)


def is_system_topic(topic: str) -> bool:
    """One of the adapter's (or RocketMQ's) system topics, never an application's."""
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_PREFIX)


def validate_group(group: str) -> str:
    """Check a producer or consumer group name by RocketMQ's rules and return it."""
    return _check_characters("group", group, GROUP_MAX_LENGTH)


def retry_topic(group: str) -> str:
    """``%RETRY%<group>``: where a clustering consumer group's failed messages come back."""
    return RETRY_PREFIX + validate_group(group)


def dlq_topic(group: str) -> str:
    """``%DLQ%<group>``: where messages land after the group's last retry."""
    return DLQ_PREFIX + validate_group(group)


def check_topic(group: str) -> str:
    """``%CHECK%<group>``: the coordinator's check-back requests for a producer group."""
    return CHECK_PREFIX + validate_group(group)


def group_of(topic: str) -> str | None:
    """The group of a retry, dead-letter or check topic; ``None`` for any other topic."""
    for prefix in (RETRY_PREFIX, DLQ_PREFIX, CHECK_PREFIX):
        if topic.startswith(prefix) and len(topic) > len(prefix):
            return topic[len(prefix) :]
    return None


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_PREFIX)


NAMESPACE_SEPARATOR = "%"
_NAMESPACE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def check_namespace(namespace: str) -> str:
    """``namespace`` when RocketMQ allows it (letters, digits, ``_``, ``-``; up to 64)."""
    if not _NAMESPACE.match(namespace):
        raise InvalidNameError(f"the namespace [{namespace[:70]}] must be 1-64 of ^[a-zA-Z0-9_-]+$")
    return namespace


def with_namespace(namespace: str, name: str) -> str:
    """``name`` (a topic or group) in ``namespace``: ``<namespace>%<name>``; a retry or
    dead-letter topic as ``%RETRY%<namespace>%<group>``. No namespace, a system topic or a
    name already in the namespace is left as it is (RocketMQ's ``wrapNamespace``)."""
    if not namespace or not name or is_system_topic(name):
        return name
    prefix = check_namespace(namespace) + NAMESPACE_SEPARATOR
    for system in (RETRY_PREFIX, DLQ_PREFIX):
        if name.startswith(system):
            rest = name[len(system) :]
            return name if rest.startswith(prefix) else system + prefix + rest
    return name if name.startswith(prefix) else prefix + name


def split_namespace(name: str) -> tuple[str, str]:
    """``(namespace, name without it)`` of a prefixed name; ``("", name)`` for one without."""
    for system in (RETRY_PREFIX, DLQ_PREFIX):
        if name.startswith(system):
            namespace, plain = split_namespace(name[len(system) :])
            return namespace, system + plain
    namespace, sep, plain = name.partition(NAMESPACE_SEPARATOR)
    if not sep or not plain or not _NAMESPACE.match(namespace):
        return "", name
    return namespace, plain


def broadcast_group_id(group: str, instance_name: str) -> str:
    """The Kafka group id that stores one broadcasting consumer instance's own offsets.

    RocketMQ keeps broadcasting offsets per client (``<ip>@<instanceName>``) on local disk;
    here they live in Kafka under ``<group>@<instanceName>``, so a restarted instance with
    the same name resumes where it stopped.
    """
    return f"{validate_group(group)}@{instance_name}"


PRIORITY_INFIX = ".priority-"
"""Between a priority topic's Kafka name and a band's number: ``<kafka topic>.priority-<k>``."""


def priority_topic(topic: str, band: int) -> str:
    """The Kafka topic of priority band ``band`` of RocketMQ topic ``topic``; band 0 is the
    topic itself."""
    if isinstance(band, bool) or not isinstance(band, int) or band < 0:
        raise InvalidNameError(f"a priority band is a whole number from 0, not {band!r}")
    base = kafka_topic(topic)
    if band == 0:
        return base
    name = f"{base}{PRIORITY_INFIX}{band}"
    if len(name) > KAFKA_TOPIC_MAX_LENGTH:
        raise InvalidNameError(
            f"priority band {band} of [{topic[:40]}] needs a Kafka name of {len(name)} "
            f"characters; Kafka allows {KAFKA_TOPIC_MAX_LENGTH}",
            topic=topic,
        )
    return name


def priority_bands(kafka_name: str, kafka_names: Iterable[str]) -> dict[int, str]:
    """The bands above 0 among ``kafka_names`` of the topic whose Kafka name is
    ``kafka_name``, by band number (empty: not a topic made for priorities)."""
    prefix = kafka_name + PRIORITY_INFIX
    bands: dict[int, str] = {}
    for name in kafka_names:
        if not name.startswith(prefix):
            continue
        number = name[len(prefix) :]
        if _is_band(number):
            bands[int(number)] = name
    return bands


LITE_TOPIC_MAX_LENGTH = 64
"""The 5.x client's ``max_lite_topic_size`` until the server says otherwise."""


def validate_lite_topic(lite_topic: str) -> str:
    """A lite topic name: a topic's characters, at most 64 of them (``InvalidNameError``)."""
    return _check_characters("lite topic", lite_topic, LITE_TOPIC_MAX_LENGTH)


def priority_band(kafka_name: str) -> int:
    """The band a Kafka topic is of its topic made for priorities: ``k`` for a band's
    ``<topic>.priority-<k>``, 0 for any other topic (band 0 is the topic itself)."""
    _base, infix, band = kafka_name.rpartition(PRIORITY_INFIX)
    return int(band) if infix and _is_band(band) else 0


def _is_band(number: str) -> bool:
    """``number`` names a band above 0, as :func:`priority_topic` writes it."""
    return number.isascii() and number.isdigit() and number == str(int(number)) and number != "0"
