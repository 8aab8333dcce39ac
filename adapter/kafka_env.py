"""The ``RMQ_ADAPTER_KAFKA_<KEY>`` environment: the user's librdkafka settings, checked.

Not a RocketMQ behaviour: the escape hatch for Kafka security and tuning that every client the
product makes takes (the style guide's "documented escape hatch for extra librdkafka
settings"). ``RMQ_ADAPTER_KAFKA_SECURITY_PROTOCOL=SASL_SSL`` sets ``security.protocol``: the
key upper-cased, ``.`` written as ``_``. Two rules keep it from breaking what it tunes:

- a variable whose key librdkafka does not know is ignored, with one warning per process: a
  variable that merely shares the prefix (Kubernetes injects ``RMQ_ADAPTER_KAFKA_PORT`` and
  ``..._SERVICE_HOST`` for a Service named ``rmq-adapter-kafka``) would otherwise stop every
  client from starting. librdkafka itself is asked (:func:`is_librdkafka_setting`), so the list
  is the linked version's. Spark's Kafka source gets every key, the Java client's own
  names (``sasl.jaas.config``, ...) included;
- a setting the adapter's exactly-once delivery rests on (:data:`EXACTLY_ONCE`) is refused
  with a clear error when the settings are read: the adapter applies the user's settings last,
  so ``isolation.level=read_uncommitted`` would have shown aborted records to consumers.

The product's own settings are named apart, outside the prefix (``RMQ_ADAPTER_BROKER_JARS``).

Known gaps: a key librdkafka knows with a value it refuses fails when a client starts, with
librdkafka's message.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping

from confluent_kafka import KafkaException, Producer

from adapter.exceptions import ConfigError

log = logging.getLogger(__name__)

ENV_KAFKA_PREFIX = "RMQ_ADAPTER_KAFKA_"

EXACTLY_ONCE: Mapping[str, str] = {
    "isolation.level": "consumers read committed records only",
    "share.isolation.level": "share consumers read committed records only",
    "enable.auto.commit": "offsets are committed with the work they finish",
    "auto.commit.enable": "offsets are committed with the work they finish",
    "enable.auto.offset.store": "offsets are committed with the work they finish",
    "enable.idempotence": "a retried send is stored once",
    "max.in.flight.requests.per.connection": (
        "a send retried across a leader change is stored once (librdkafka#4953)"
    ),
    "max.in.flight": "a send retried across a leader change is stored once (librdkafka#4953)",
    "acks": "every in-sync replica holds a record before it counts as sent",
    "request.required.acks": "every in-sync replica holds a record before it counts as sent",
    "transactional.id": "each worker and producer has its own transactional id",
    "group.id": "each part of the product has its own consumer group",
    "group.instance.id": "each consumer is a member of its group of its own",
    "partition.assignment.strategy": "a coordinator owns partition p of HALF and END together",
}
"""The librdkafka settings the adapter sets itself, and what each keeps true."""

_NOT_A_SETTING = ("No such configuration property", "Java JAAS configuration")
_PROBE_KEY, _PROBE_SPARE = "batch.num.messages", "queue.buffering.max.messages"


def setting_of(variable: str) -> str:
    """The librdkafka key of an ``RMQ_ADAPTER_KAFKA_<KEY>`` variable."""
    return variable[len(ENV_KAFKA_PREFIX) :].lower().replace("_", ".")


def kafka_overrides(environ: Mapping[str, str]) -> dict[str, str]:
    """Every ``RMQ_ADAPTER_KAFKA_<KEY>`` variable as a key, unchecked (for Spark's Java client)."""
    return {
        setting_of(name): value
        for name, value in environ.items()
        if name.startswith(ENV_KAFKA_PREFIX) and len(name) > len(ENV_KAFKA_PREFIX)
    }


@functools.cache
def is_librdkafka_setting(key: str) -> bool:
    """Whether librdkafka accepts ``key`` as a setting name. Asked of librdkafka itself: a
    configuration with ``key`` and a spare setting with a bad value is refused, before any
    client is made, either for ``key`` ("No such configuration property") or for the spare."""
    spare = _PROBE_SPARE if key == _PROBE_KEY else _PROBE_KEY
    try:
        Producer({key: "1", spare: "not a number"})
    except KafkaException as exc:
        refusal = exc.args[0].str()
        # "Java JAAS configuration is not supported": a name for Spark's Java client.
        return not any(words in refusal for words in _NOT_A_SETTING)
    except (TypeError, ValueError):  # the Python wrapper's own keys (callbacks, ...)
        return False
    return True  # not expected (the spare is refused); the key was accepted


@functools.cache
def _warn_ignored(variable: str) -> None:
    log.warning(
        "%s is not a librdkafka setting (%r); ignored. Kafka settings go in "
        "RMQ_ADAPTER_KAFKA_<KEY> variables, the key upper-cased with '.' written as '_'",
        variable,
        setting_of(variable),
    )


def librdkafka_overrides(environ: Mapping[str, str]) -> dict[str, str]:
    """The ``RMQ_ADAPTER_KAFKA_<KEY>`` variables that are librdkafka settings, as settings.

    Raises:
        ConfigError: one of them overrides a setting of :data:`EXACTLY_ONCE`.
    """
    settings: dict[str, str] = {}
    for name, value in sorted(environ.items()):
        if not name.startswith(ENV_KAFKA_PREFIX) or len(name) == len(ENV_KAFKA_PREFIX):
            continue
        key = setting_of(name)
        if not is_librdkafka_setting(key):
            _warn_ignored(name)
            continue
        refuse_exactly_once_override(key, name)
        settings[key] = value
    return settings


def refuse_exactly_once_override(key: str, where: str) -> None:
    """:class:`ConfigError` when ``key`` (given by ``where``) is one of :data:`EXACTLY_ONCE`."""
    why = EXACTLY_ONCE.get(key)
    if why is not None:
        raise ConfigError(
            f"{where} would override {key}, which the adapter sets itself and its exactly-once "
            f"delivery depends on ({why}); remove it"
        )


_SECRET_WORDS = ("password", "secret", "jaas", "oauthbearer.config", "key.pem", "token")


def masked(settings: Mapping[str, object]) -> dict[str, object]:
    """``settings`` with the values of secret keys (passwords, keys, tokens) hidden, for a
    ``repr`` or a log line."""
    return {
        key: "***" if any(word in key for word in _SECRET_WORDS) else value
        for key, value in settings.items()
    }
