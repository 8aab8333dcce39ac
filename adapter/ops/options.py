"""The options and error handling every ``rmq-adapter`` command shares.

Not a RocketMQ behaviour: the command line's conventions in one place. Every option also reads
an ``RMQ_ADAPTER_<NAME>`` environment variable, which ``--help`` shows; an adapter or Kafka
error ends a command with one line and exit code 1, never a traceback.

Known gaps: none.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from confluent_kafka import KafkaException

from adapter.delay import DEFAULT_LEVELS
from adapter.exceptions import AdapterError
from adapter.ops.message_index import ENV_INDEX

F = TypeVar("F", bound=Callable[..., Any])


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def clear_errors(command: F) -> F:
    """Adapter and Kafka errors end the command with one line and exit code 1."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except AdapterError as exc:
            raise click.ClickException(str(exc)) from exc
        except KafkaException as exc:
            raise click.ClickException(f"Kafka: {exc.args[0].str()}") from exc

    return run  # type: ignore[return-value]


def option(name: str, help: str, *, envvar: str | None = None, **kwargs: Any) -> Callable[[F], F]:
    """A click option read from ``RMQ_ADAPTER_<NAME>`` too (``--check-max``:
    ``RMQ_ADAPTER_CHECK_MAX``), which ``--help`` shows."""
    envvar = envvar or "RMQ_ADAPTER_" + name.lstrip("-").upper().replace("-", "_")
    return click.option(name, envvar=envvar, show_envvar=True, help=help, **kwargs)


bootstrap = option(
    "--bootstrap",
    required=True,
    help="Kafka bootstrap servers (host:port[,host:port...]).",
)
timeout = option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=10.0,
    help="Seconds to wait for Kafka before failing.",
)
message_index = click.option(
    "--index",
    "index",
    default=None,
    envvar=ENV_INDEX,
    show_envvar=True,
    type=click.Path(path_type=Path),
    help="The message index (Delta table of `rmq-adapter spark index`) to answer from.",
)
metrics_host = option(
    "--metrics-host",
    default="127.0.0.1",
    help="Address of the metrics and probes endpoint (0.0.0.0 in a container).",
)
stop_timeout = option(
    "--stop-timeout",
    type=click.FloatRange(min=1),
    default=30.0,
    help="Seconds a stop may take before the process exits regardless.",
)
delay_levels = option(
    "--delay-levels",
    default=DEFAULT_LEVELS,
    help="RocketMQ messageDelayLevel; must match SCHEDULE_TOPIC_XXXX's partition count.",
)


_ROCKETMQ_TIME = re.compile(r"^(\d{4}-\d{2}-\d{2})#(\d{2}:\d{2}:\d{2})(?::(\d{3}))?$")


def parse_time(text: str) -> int:
    """Epoch milliseconds from an operator's time: epoch milliseconds, ISO 8601 (with an offset,
    or in this machine's local time zone without one), or ``mqadmin``'s
    ``yyyy-MM-dd#HH:mm:ss:SSS`` (local time)."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    rocketmq = _ROCKETMQ_TIME.match(text)
    if rocketmq:
        day, clock, millis = rocketmq.groups()
        text = f"{day}T{clock}.{millis or '000'}"
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not a time: give epoch milliseconds, ISO 8601 "
            "(2026-11-25T10:00:00+00:00) or yyyy-MM-dd#HH:mm:ss:SSS"
        ) from None
    if when.tzinfo is None:
        when = when.astimezone()  # local time, as mqadmin reads it
    return int(when.timestamp() * 1000)
