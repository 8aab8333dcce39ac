"""``rmq-adapter``: the command line of the adapter (broker, topics, workers, admin).

Not a RocketMQ behaviour by itself: it plays the part of ``mqbroker`` / ``mqadmin`` for a
Kafka-backed deployment. Every option can also be set with the ``RMQ_ADAPTER_*`` environment
variable ``--help`` shows beside it, and every Kafka client a command creates takes the
``RMQ_ADAPTER_KAFKA_*`` settings (security included). A command that cannot reach Kafka fails
within ``--timeout`` seconds with one line naming the address and the cause, and exit code 1.

Known gaps: no ``mqadmin`` commands beyond those listed in docs/cli.md.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

import click

from adapter import __version__, logs, naming
from adapter.clock import SYSTEM_CLOCK
from adapter.config import KafkaSettings, default_worker_id
from adapter.delay import DelayLevels
from adapter.exceptions import KafkaUnavailableError
from adapter.kafka import clients, topics
from adapter.kafka.metadata import PartitionCounts
from adapter.kafka.worker import AnyWorker
from adapter.kafka.worker_config import DEFAULT_KAFKA_TRANSACTION_TIMEOUT_MS
from adapter.ops.broker_cli import broker
from adapter.ops.console_cli import console_command
from adapter.ops.dlq_cli import dlq_group
from adapter.ops.exporter_cli import exporter_command, monitoring_group
from adapter.ops.groups_cli import groups_group
from adapter.ops.message_cli import message_group
from adapter.ops.options import bootstrap as _bootstrap
from adapter.ops.options import clear_errors as _clear_errors
from adapter.ops.options import delay_levels as _delay_levels
from adapter.ops.options import metrics_host as _metrics_host
from adapter.ops.options import option, plural
from adapter.ops.options import stop_timeout as _stop_timeout
from adapter.ops.options import timeout as _timeout
from adapter.ops.proxy_cli import proxy_command
from adapter.ops.topics_cli import topics_group
from adapter.ops.transactions_cli import transactions_group
from adapter.schedule.config import DEFAULT_MISSING_TOPIC_GRACE_MS, ForwarderConfig
from adapter.schedule.grants import ScheduleGrants
from adapter.transaction.config import CheckPolicy, CoordinatorConfig

__all__ = ["main", "plural"]


@click.group(context_settings={"show_default": True})
@click.version_option(__version__, prog_name="rmq-adapter")
@option(
    "--log-level",
    type=click.Choice(logs.LEVELS, case_sensitive=False),
    default="INFO",
    help="Python log level (librdkafka's lines follow it).",
)
@click.pass_context
def main(ctx: click.Context, log_level: str) -> None:
    """RocketMQ transactional and delayed messages on Apache Kafka."""
    logs.configure(log_level)
    if ctx.invoked_subcommand not in _LOGS_ON_STDOUT:
        # A command's result is its standard output (a table, JSON, an address): logs apart.
        for handler in logging.getLogger().handlers:
            if isinstance(handler, logging.StreamHandler):
                handler.setStream(sys.stderr)


_LOGS_ON_STDOUT = {"worker", "proxy", "exporter", "console"}
"""Long-running processes log JSON lines on standard output, as containers expect."""


main.add_command(broker)
main.add_command(topics_group)
main.add_command(transactions_group)
main.add_command(groups_group)
main.add_command(dlq_group)
main.add_command(message_group)
main.add_command(exporter_command)
main.add_command(monitoring_group)


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


def _forwarder(options: dict[str, Any], registry: Any) -> AnyWorker:
    from adapter.schedule.forwarder import ScheduleForwarder

    grants = options["schedule_grants"]
    config = ForwarderConfig(
        KafkaSettings.from_env(options["bootstrap"]),
        levels=DelayLevels.parse(options["delay_levels"]),
        worker_id=options["worker_id"] or default_worker_id(),
        kafka_transaction_timeout_ms=options["kafka_transaction_timeout_ms"],
        missing_topic_grace_ms=int(options["missing_topic_grace"] * 1000),
        grants=None if grants is None else ScheduleGrants.load(grants),
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


def _refuse_other_delay_levels(options: dict[str, Any]) -> None:
    """A forwarder whose level table does not match ``SCHEDULE_TOPIC_XXXX`` would deliver at
    the wrong delays: refuse it at start, with both tables. A Kafka that does not answer
    within a few seconds, or a topic not made yet, is left to the worker to report."""
    conf = KafkaSettings.from_env(options["bootstrap"]).librdkafka({})
    try:
        clients.reach(conf, _PREFLIGHT_S)
    except KafkaUnavailableError:
        return
    counts = PartitionCounts(clients.admin(conf).list_topics, timeout_s=_PREFLIGHT_S)
    if counts.count(naming.kafka_topic(naming.SCHEDULE_TOPIC)):
        topics.check_schedule_partitions(counts, DelayLevels.parse(options["delay_levels"]))


_PREFLIGHT_S = 5.0

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
@_metrics_host
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
@_stop_timeout
@_delay_levels
@option(
    "--missing-topic-grace",
    type=click.FloatRange(min=0),
    default=DEFAULT_MISSING_TOPIC_GRACE_MS / 1000,
    help="Seconds a delayed message whose topic does not exist is retried before it is parked.",
)
@option(
    "--schedule-grants",
    type=click.Path(dir_okay=False),
    default=None,
    help="JSON file of the applications that sign SCHEDULE records, with their keys and "
    "topics: only their signed records are forwarded, each to its signer's topics.",
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

    if _forwarder in WORKERS[kind]:
        _refuse_other_delay_levels(options)
    registry = CollectorRegistry()
    port = options["metrics_port"]
    workers.run_in_foreground(
        [make(options, registry) for make in WORKERS[kind]],
        registry=registry,
        endpoint=None if port is None else workers.Endpoint(options["metrics_host"], port),
        install_signals=workers.stop_on_termination,
        stop_timeout_s=options["stop_timeout"],
        burst=options["burst"],
    )


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
        return ["points", "telemetry", "index"]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        return self._group().get_command(ctx, name)


main.add_command(
    _SparkCommands(
        "spark",
        help="Spark Structured Streaming jobs on the real topics (points, telemetry, index).",
    )
)

main.add_command(proxy_command)
main.add_command(console_command)


if __name__ == "__main__":
    main()
