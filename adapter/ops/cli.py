"""``rmq-adapter``: the command line of the adapter (broker, topics, workers, admin).

Not a RocketMQ behaviour by itself: it plays the part of ``mqbroker`` / ``mqadmin`` for a
Kafka-backed deployment. Every option can also be set with the ``RMQ_ADAPTER_*`` environment
variable ``--help`` shows beside it, and every Kafka client a command creates takes the
``RMQ_ADAPTER_KAFKA_*`` settings (security included). A command that cannot reach Kafka fails
within ``--timeout`` seconds with one line naming the address and the cause, and exit code 1.

Known gaps: no ``mqadmin`` commands beyond those listed in the README.
"""

from __future__ import annotations

import functools
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from confluent_kafka import KafkaException

from adapter import __version__, logs
from adapter.clock import SYSTEM_CLOCK
from adapter.config import (
    DEFAULT_KAFKA_TRANSACTION_TIMEOUT_MS,
    DEFAULT_MISSING_TOPIC_GRACE_MS,
    CheckPolicy,
    CoordinatorConfig,
    ForwarderConfig,
    KafkaSettings,
    default_worker_id,
)
from adapter.delay import DEFAULT_LEVELS, DelayLevels
from adapter.exceptions import AdapterError
from adapter.kafka import clients, topics
from adapter.kafka.worker import AnyWorker
from adapter.ops import broker as local_broker
from adapter.ops.proxy_cli import proxy_command

F = TypeVar("F", bound=Callable[..., Any])


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _clear_errors(command: F) -> F:
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


_bootstrap = option(
    "--bootstrap",
    required=True,
    help="Kafka bootstrap servers (host:port[,host:port...]).",
)
_timeout = option(
    "--timeout",
    type=click.FloatRange(min=0.1),
    default=10.0,
    help="Seconds to wait for Kafka before failing.",
)
_delay_levels = option(
    "--delay-levels",
    default=DEFAULT_LEVELS,
    help="RocketMQ messageDelayLevel; must match SCHEDULE_TOPIC_XXXX's partition count.",
)


@click.group(context_settings={"show_default": True})
@click.version_option(__version__, prog_name="rmq-adapter")
@option(
    "--log-level",
    type=click.Choice(logs.LEVELS, case_sensitive=False),
    default="INFO",
    help="Python log level (librdkafka's lines follow it).",
)
def main(log_level: str) -> None:
    """RocketMQ transactional and delayed messages on Apache Kafka."""
    logs.configure(log_level)


# -- broker -------------------------------------------------------------------------------


@main.group()
def broker() -> None:
    """A local single-node Kafka broker (KRaft) on 127.0.0.1, for development."""


_data_dir = option(
    "--data-dir",
    "Where the broker keeps its data, log and PID.",
    envvar="RMQ_ADAPTER_BROKER_DATA_DIR",
    type=click.Path(path_type=Path),
    required=True,
)


@broker.command("start")
@_data_dir
@option(
    "--port",
    "Client port on 127.0.0.1 (the controller takes the next one).",
    envvar="RMQ_ADAPTER_BROKER_PORT",
    type=click.IntRange(1, 65534),
    default=local_broker.DEFAULT_PORT,
)
@option(
    "--timeout",
    "Seconds to wait for the broker to accept connections.",
    envvar="RMQ_ADAPTER_BROKER_TIMEOUT",
    type=click.FloatRange(min=1),
    default=90.0,
)
@_clear_errors
def broker_start(data_dir: Path, port: int, timeout: float) -> None:
    """Start the broker in the background; print its bootstrap address when it is ready."""
    address = local_broker.start(
        local_broker.BrokerConfig(data_dir, port=port, start_timeout_s=timeout)
    )
    click.echo(address)


@broker.command("stop")
@_data_dir
def broker_stop(data_dir: Path) -> None:
    """Stop the broker started from DATA_DIR (by its PID)."""
    if local_broker.stop(data_dir):
        click.echo(f"stopped the broker of {data_dir}")
    else:
        click.echo(f"no broker was running from {data_dir}")


# -- topics -------------------------------------------------------------------------------


@main.group("topics")
def topics_group() -> None:
    """The system topics."""


@topics_group.command("init")
@_bootstrap
@option(
    "--half-partitions",
    type=click.IntRange(min=1),
    default=None,
    help="Partitions of the HALF, END and OP topics (default: the existing count, else 8).",
)
@option(
    "--replication-factor",
    type=click.IntRange(min=1),
    default=None,
    help="Replication factor of new system topics (default: 3 on three brokers or more, else 1).",
)
@option(
    "--min-insync-replicas",
    type=click.IntRange(min=1),
    default=None,
    help="min.insync.replicas of new system topics (default: the factor - 1, at least 1).",
)
@option(
    "--allow-under-replicated",
    is_flag=True,
    default=False,
    help="Accept a replication factor below 3 on a cluster of three brokers or more.",
)
@_delay_levels
@_timeout
@_clear_errors
def topics_init(
    bootstrap: str,
    half_partitions: int | None,
    replication_factor: int | None,
    min_insync_replicas: int | None,
    allow_under_replicated: bool,
    delay_levels: str,
    timeout: float,
) -> None:
    """Create the system topics idempotently; refuse layouts that break the rules."""
    levels = DelayLevels.parse(delay_levels)
    conf = KafkaSettings.from_env(bootstrap).librdkafka({})
    metadata = clients.reach(conf, timeout)
    partitions = (
        half_partitions
        or topics.existing_half_partitions(metadata)
        or topics.DEFAULT_HALF_PARTITIONS
    )
    replication = topics.replication_for(
        len(metadata.brokers),
        replication_factor,
        min_insync_replicas,
        allow_under_replicated=allow_under_replicated,
    )
    layout = topics.system_layout(partitions, levels, replication)
    created = topics.init_topics(conf, layout, timeout)
    for spec in layout:
        state = "created" if spec.name in created else "ok"
        shape = plural(spec.partitions, "partition")
        if spec.name in created:
            shape += f", replication {replication.factor}, min ISR {replication.min_insync}"
        click.echo(f"{state:8} {spec.name} ({shape})")


# -- status -------------------------------------------------------------------------------


@main.command("status")
@_bootstrap
@_delay_levels
@_timeout
@_clear_errors
def status_command(bootstrap: str, delay_levels: str, timeout: float) -> None:
    """Each delay level's backlog and oldest due time; retry and dead letters per group."""
    from adapter.ops import status

    levels, groups = status.gather(
        KafkaSettings.from_env(bootstrap), DelayLevels.parse(delay_levels), timeout
    )
    click.echo(status.render(levels, groups, SYSTEM_CLOCK.now_ms()))


# -- workers ------------------------------------------------------------------------------


def _on_termination(stop: Callable[[], None]) -> None:
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop())


def _forwarder(options: dict[str, Any], registry: Any) -> AnyWorker:
    from adapter.schedule.forwarder import ScheduleForwarder

    config = ForwarderConfig(
        KafkaSettings.from_env(options["bootstrap"]),
        levels=DelayLevels.parse(options["delay_levels"]),
        worker_id=options["worker_id"] or default_worker_id(),
        kafka_transaction_timeout_ms=options["kafka_transaction_timeout_ms"],
        missing_topic_grace_ms=int(options["missing_topic_grace"] * 1000),
    )
    return ScheduleForwarder(config, registry)


def _coordinator(options: dict[str, Any], registry: Any) -> AnyWorker:
    from adapter.transaction.coordinator import TransactionCoordinator

    config = CoordinatorConfig(
        KafkaSettings.from_env(options["bootstrap"]),
        policy=CheckPolicy(
            transaction_timeout_ms=options["transaction_timeout_ms"],
            check_interval_ms=options["check_interval_ms"],
            check_max=options["check_max"],
        ),
        worker_id=options["worker_id"] or default_worker_id(),
        kafka_transaction_timeout_ms=options["kafka_transaction_timeout_ms"],
    )
    return TransactionCoordinator(config, registry)


WORKERS: dict[str, list[Callable[[dict[str, Any], Any], AnyWorker]]] = {
    "schedule": [_forwarder],
    "transactions": [_coordinator],
    "all": [_forwarder, _coordinator],
}


@main.command("worker")
@click.argument("kind", metavar="KIND", type=click.Choice(sorted(WORKERS)))
@_bootstrap
@option(
    "--worker-id",
    default=None,
    help="Stable id of this worker (its transactional ids); default: host name and PID.",
)
@option(
    "--kafka-transaction-timeout-ms",
    envvar="RMQ_ADAPTER_WORKER_KAFKA_TRANSACTION_TIMEOUT_MS",
    type=click.IntRange(min=1000),
    default=DEFAULT_KAFKA_TRANSACTION_TIMEOUT_MS,
    help="Kafka's transaction.timeout.ms for the worker's own transactions.",
)
@option(
    "--metrics-host",
    default="127.0.0.1",
    help="Address of the metrics and probes endpoint (0.0.0.0 in a container).",
)
@option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Port of /metrics, /healthz and /readyz (none when not set).",
)
@option(
    "--burst",
    is_flag=True,
    help="Run until idle (everything read, nothing due), then exit 0.",
)
@option(
    "--stop-timeout",
    type=click.FloatRange(min=1),
    default=30.0,
    help="Seconds a stop may take before the process exits regardless.",
)
@_delay_levels
@option(
    "--missing-topic-grace",
    type=click.FloatRange(min=0),
    default=DEFAULT_MISSING_TOPIC_GRACE_MS / 1000,
    help="Seconds a delayed message whose topic does not exist is retried before it is parked.",
)
@option(
    "--transaction-timeout-ms",
    type=click.IntRange(min=1),
    default=CheckPolicy().transaction_timeout_ms,
    help="RocketMQ transactionTimeOut: the first check comes this long after birth.",
)
@option(
    "--check-interval-ms",
    type=click.IntRange(min=1),
    default=CheckPolicy().check_interval_ms,
    help="RocketMQ transactionCheckInterval: the time between two checks.",
)
@option(
    "--check-max",
    type=click.IntRange(min=0),
    default=CheckPolicy().check_max,
    help="RocketMQ transactionCheckMax: checks before a message is discarded.",
)
@_clear_errors
def worker(kind: str, **options: Any) -> None:
    """Run adapter workers in the foreground; SIGTERM (or Ctrl-C) stops them cleanly.

    \b
    KIND is one of:
      schedule      forward delayed messages from SCHEDULE_TOPIC_XXXX, exactly once
      transactions  apply transaction decisions exactly once, check undecided ones on time
      all           both, in one process

    --delay-levels applies to schedule and all; the check options to transactions and all.
    """
    from prometheus_client import CollectorRegistry

    from adapter.ops import workers

    registry = CollectorRegistry()
    port = options["metrics_port"]
    workers.run_in_foreground(
        [make(options, registry) for make in WORKERS[kind]],
        registry=registry,
        endpoint=None if port is None else workers.Endpoint(options["metrics_host"], port),
        install_signals=_on_termination,
        stop_timeout_s=options["stop_timeout"],
        burst=options["burst"],
    )


# -- transactions -------------------------------------------------------------------------


@main.group("transactions")
def transactions_group() -> None:
    """Pending and discarded transactional messages."""


@transactions_group.command("list")
@_bootstrap
@option(
    "--discarded", is_flag=True, help="List TRANS_CHECK_MAX_TIME_TOPIC instead of pending ones."
)
@_timeout
@_clear_errors
def transactions_list(bootstrap: str, discarded: bool, timeout: float) -> None:
    """Pending half messages with their age, check count and group."""
    from adapter.transaction import admin

    settings = KafkaSettings.from_env(bootstrap)
    rows = admin.discarded(settings, timeout) if discarded else admin.pending(settings, timeout)
    click.echo(admin.render(rows, discarded=discarded, now_ms=SYSTEM_CLOCK.now_ms()))


@transactions_group.command("resume")
@_bootstrap
@click.argument("transaction_id")
@_timeout
@_clear_errors
def transactions_resume(bootstrap: str, transaction_id: str, timeout: float) -> None:
    """Put a discarded message back into HALF with its check count reset (once)."""
    from adapter.transaction import admin

    resumed = admin.resume(KafkaSettings.from_env(bootstrap), transaction_id, timeout_s=timeout)
    click.echo(f"resumed {transaction_id} as half message {resumed.partition}@{resumed.offset}")


class _SparkCommands(click.Group):
    """``rmq-adapter spark ...``: the Spark jobs, loaded on first use, so that the command line
    works (and says what to install) without PySpark."""

    def _group(self) -> click.Group:
        try:
            from adapter.spark.cli import spark
        except ImportError as exc:
            raise click.ClickException(str(exc)) from exc
        return spark

    def list_commands(self, ctx: click.Context) -> list[str]:
        return ["points", "telemetry"]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        return self._group().get_command(ctx, name)


main.add_command(
    _SparkCommands(
        "spark", help="Spark Structured Streaming jobs on the real topics (points, telemetry)."
    )
)

main.add_command(proxy_command)


if __name__ == "__main__":
    main()
