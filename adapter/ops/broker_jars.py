"""Which Kafka jars the local broker runs, and fetching the pinned ones into the user cache.

Not a RocketMQ behaviour: part of the development broker (:mod:`adapter.ops.broker`). First
found wins: ``--jars-dir``, ``RMQ_ADAPTER_BROKER_JARS`` (outside the ``RMQ_ADAPTER_KAFKA_*``
prefix, which holds librdkafka settings; its old name ``RMQ_ADAPTER_KAFKA_JARS`` is still
read, with a warning), a checkout's ``infra/.jars/kafka`` (``make jars``), else the user cache
(:func:`adapter.jars.cache_root`), which the first start fills from Maven Central with the
jars ``kafka-jars.lock`` pins, checksums checked (:mod:`adapter.jars`).

Known gaps: a directory named by the option or the variable is used as it is, unchecked.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from adapter import jars

log = logging.getLogger(__name__)

ENV_JARS = "RMQ_ADAPTER_BROKER_JARS"
"""Where the Kafka jars are (default: a checkout's ``infra/.jars/kafka``, else the cache)."""
OLD_ENV_JARS = "RMQ_ADAPTER_KAFKA_JARS"
"""The jars' old name, read with a warning: ``RMQ_ADAPTER_KAFKA_*`` are librdkafka settings."""


def repo_root() -> Path:
    """The checkout this module runs from (``infra/.jars`` lives there)."""
    return Path(__file__).resolve().parents[2]


def jar_lock() -> jars.Lock:
    """The Kafka jars the broker runs, pinned (package data)."""
    return jars.Lock.parse(Path(__file__).with_name("kafka-jars.lock").read_text())


def _checkout_jars() -> Path | None:
    found = repo_root() / "infra" / ".jars" / "kafka"
    return found if any(found.glob("kafka_2.13-*.jar")) else None


def default_jars_dir(environ: Mapping[str, str] | None = None) -> Path:
    """``RMQ_ADAPTER_BROKER_JARS``, else the checkout's ``infra/.jars/kafka`` when it holds
    the jars, else the user cache's directory of the pinned jars (filled by :func:`jars_dir`)."""
    env = os.environ if environ is None else environ
    configured = env.get(ENV_JARS)
    if not configured and env.get(OLD_ENV_JARS):
        log.warning("%s is deprecated: name the jars' directory %s", OLD_ENV_JARS, ENV_JARS)
        configured = env[OLD_ENV_JARS]
    if configured:
        return Path(configured)
    return _checkout_jars() or jars.cache_root(env) / jar_lock().name


def jars_dir(
    configured: Path | None = None,
    environ: Mapping[str, str] | None = None,
    progress: jars.TextProgress | None = None,
) -> Path:
    """The directory of the jars to run (see the module's documentation); the user cache is
    filled from Maven Central first when it lacks them, reporting to ``progress``.

    Raises:
        adapter.jars.JarsError: a jar could not be fetched or is not the pinned file.
    """
    env = os.environ if environ is None else environ
    chosen = configured or default_jars_dir(env)
    lock = jar_lock()
    if chosen != jars.cache_root(env) / lock.name:
        return chosen
    return jars.ensure(
        lock,
        chosen,
        repository_url=jars.repository(env),
        progress=progress,
        on_start=progress.start if progress is not None else _log_fetch,
    )


def _log_fetch(lock: jars.Lock, directory: Path, repository_url: str) -> None:
    log.info(
        "fetching the Kafka broker's %d jars from %s into %s, once",
        len(lock.artifacts),
        repository_url,
        directory,
    )
