"""``rmq-adapter``: the command line of the adapter (broker, topics, workers, admin).

Not a RocketMQ behaviour by itself: it plays the part of ``mqbroker`` / ``mqadmin`` for a
Kafka-backed deployment. Every option can also be set with an ``RMQ_ADAPTER_*`` environment
variable (``--bootstrap`` is ``RMQ_ADAPTER_BOOTSTRAP``).

Known gaps: no ``mqadmin`` commands beyond those listed in the README.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from pathlib import Path

import click

from adapter import broker as local_broker
from adapter import logs, naming, topics
from adapter.config import (
    DEFAULT_KAFKA_TRANSACTION_TIMEOUT_MS,
    CoordinatorConfig,
    ForwarderConfig,
    KafkaSettings,
    default_worker_id,
)
from adapter.delay import DEFAULT_LEVELS, DelayLevels
from adapter.exceptions import AdapterError
from adapter.transaction.state import CheckPolicy


def _fail(exc: Exception) -> None:
    click.echo(f"error: {exc}", err=True)
    sys.exit(1)


@click.group(context_settings={"auto_envvar_prefix": "RMQ_ADAPTER", "show_default": True})
@click.option("--log-level", default="INFO", help="Python log level.")
def main(log_level: str) -> None:
    """RocketMQ transactional and delayed messages on Apache Kafka."""
    logs.configure(log_level)


@main.group()
def broker() -> None:
    """A local single-node Kafka broker (KRaft) on 127.0.0.1."""


@broker.command("start")
@click.option("--data-dir", type=click.Path(path_type=Path), required=True)
@click.option("--port", type=int, default=local_broker.DEFAULT_PORT)
@click.option("--timeout", type=float, default=90.0, help="Seconds to wait for the broker.")
def broker_start(data_dir: Path, port: int, timeout: float) -> None:
    """Start the broker in the background; print its bootstrap address when it is ready."""
    try:
        address = local_broker.start(
            local_broker.BrokerConfig(data_dir, port=port, start_timeout_s=timeout)
        )
    except AdapterError as exc:
        _fail(exc)
    click.echo(address)


@broker.command("stop")
@click.option("--data-dir", type=click.Path(path_type=Path), required=True)
def broker_stop(data_dir: Path) -> None:
    """Stop the broker started from DATA_DIR (by its PID)."""
    if local_broker.stop(data_dir):
        click.echo(f"stopped the broker of {data_dir}")
    else:
        click.echo(f"no broker was running from {data_dir}")


@main.group("topics")
def topics_group() -> None:
    """The system topics."""


@topics_group.command("init")
@click.option("--bootstrap", required=True, help="Kafka bootstrap servers.")
@click.option(
    "--half-partitions",
    type=int,
    default=None,
    help="Partitions of the HALF, END and OP topics (default: the existing count, else 8).",
)
@click.option("--delay-levels", default=DEFAULT_LEVELS, help="RocketMQ messageDelayLevel.")
def topics_init(bootstrap: str, half_partitions: int | None, delay_levels: str) -> None:
    """Create the system topics idempotently; refuse layouts that break the rules."""
    try:
        levels = DelayLevels.parse(delay_levels)
        partitions = half_partitions or _existing_half_partitions(bootstrap)
        layout = topics.system_layout(partitions, levels)
        created = topics.init_topics(bootstrap, layout)
    except AdapterError as exc:
        _fail(exc)
    for spec in layout:
        state = "created" if spec.name in created else "ok"
        click.echo(f"{state:8} {spec.name} ({spec.partitions} partitions)")


def _existing_half_partitions(bootstrap: str) -> int:
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
    info = metadata.topics.get(naming.TRANS_HALF_TOPIC)
    if info is not None and info.partitions:
        return len(info.partitions)
    return topics.DEFAULT_HALF_PARTITIONS


@main.command("status")
@click.option("--bootstrap", envvar="RMQ_ADAPTER_BOOTSTRAP", required=True)
@click.option("--delay-levels", envvar="RMQ_ADAPTER_DELAY_LEVELS", default=DEFAULT_LEVELS)
def status_command(bootstrap: str, delay_levels: str) -> None:
    """Each delay level's backlog and oldest due time; retry and dead letters per group."""
    from adapter import status

    try:
        levels, groups = status.gather(
            KafkaSettings.from_env(bootstrap), DelayLevels.parse(delay_levels)
        )
    except AdapterError as exc:
        _fail(exc)
    click.echo(status.render(levels, groups))


@main.group()
def worker() -> None:
    """Adapter workers, in the foreground; SIGTERM (or Ctrl-C) stops them cleanly."""


def _on_termination(stop: Callable[[], None]) -> None:
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop())


_Decorator = Callable[[Callable[..., None]], Callable[..., None]]


def _options(*options: _Decorator) -> _Decorator:
    """Several click options as one decorator, in the order given."""

    def apply(fn: Callable[..., None]) -> Callable[..., None]:
        for option in reversed(options):
            fn = option(fn)
        return fn

    return apply


_common_worker_options = _options(
    click.option("--bootstrap", envvar="RMQ_ADAPTER_BOOTSTRAP", required=True),
    click.option(
        "--worker-id",
        envvar="RMQ_ADAPTER_WORKER_ID",
        default=None,
        help="Stable id of this worker (its transactional ids); default: host name and PID.",
    ),
    click.option(
        "--kafka-transaction-timeout-ms",
        envvar="RMQ_ADAPTER_WORKER_KAFKA_TRANSACTION_TIMEOUT_MS",
        type=int,
        default=DEFAULT_KAFKA_TRANSACTION_TIMEOUT_MS,
        help="Kafka's transaction.timeout.ms for the worker's own transactions.",
    ),
    click.option("--metrics-port", envvar="RMQ_ADAPTER_METRICS_PORT", type=int, default=None),
)

_delay_levels_option = click.option(
    "--delay-levels",
    envvar="RMQ_ADAPTER_DELAY_LEVELS",
    default=DEFAULT_LEVELS,
    help="RocketMQ messageDelayLevel; must match SCHEDULE_TOPIC_XXXX's partition count.",
)

_check_options = _options(
    click.option(
        "--transaction-timeout-ms",
        envvar="RMQ_ADAPTER_TRANSACTION_TIMEOUT_MS",
        type=int,
        default=CheckPolicy().transaction_timeout_ms,
        help="RocketMQ transactionTimeOut: the first check comes this long after birth.",
    ),
    click.option(
        "--check-interval-ms",
        envvar="RMQ_ADAPTER_CHECK_INTERVAL_MS",
        type=int,
        default=CheckPolicy().check_interval_ms,
        help="RocketMQ transactionCheckInterval: the time between two checks.",
    ),
    click.option(
        "--check-max",
        envvar="RMQ_ADAPTER_CHECK_MAX",
        type=int,
        default=CheckPolicy().check_max,
        help="RocketMQ transactionCheckMax: checks before a message is discarded.",
    ),
)


def _forwarder_config(
    bootstrap: str, delay_levels: str, worker_id: str | None, kafka_transaction_timeout_ms: int
) -> ForwarderConfig:
    return ForwarderConfig(
        KafkaSettings.from_env(bootstrap),
        levels=DelayLevels.parse(delay_levels),
        worker_id=worker_id or default_worker_id(),
        kafka_transaction_timeout_ms=kafka_transaction_timeout_ms,
    )


def _coordinator_config(
    bootstrap: str,
    worker_id: str | None,
    kafka_transaction_timeout_ms: int,
    transaction_timeout_ms: int,
    check_interval_ms: int,
    check_max: int,
) -> CoordinatorConfig:
    return CoordinatorConfig(
        KafkaSettings.from_env(bootstrap),
        policy=CheckPolicy(
            transaction_timeout_ms=transaction_timeout_ms,
            check_interval_ms=check_interval_ms,
            check_max=check_max,
        ),
        worker_id=worker_id or default_worker_id(),
        kafka_transaction_timeout_ms=kafka_transaction_timeout_ms,
    )


@worker.command("schedule")
@_common_worker_options
@_delay_levels_option
def worker_schedule(
    bootstrap: str,
    worker_id: str | None,
    kafka_transaction_timeout_ms: int,
    metrics_port: int | None,
    delay_levels: str,
) -> None:
    """Forward delayed messages from SCHEDULE_TOPIC_XXXX to their real topics, exactly once."""
    from adapter import workers

    try:
        config = _forwarder_config(bootstrap, delay_levels, worker_id, kafka_transaction_timeout_ms)
        workers.run_in_foreground(workers.forwarder(config), metrics_port, _on_termination)
    except AdapterError as exc:
        _fail(exc)


@worker.command("transactions")
@_common_worker_options
@_check_options
def worker_transactions(
    bootstrap: str,
    worker_id: str | None,
    kafka_transaction_timeout_ms: int,
    metrics_port: int | None,
    transaction_timeout_ms: int,
    check_interval_ms: int,
    check_max: int,
) -> None:
    """Apply transaction decisions exactly once and check undecided half messages on time."""
    from adapter import workers

    try:
        config = _coordinator_config(
            bootstrap,
            worker_id,
            kafka_transaction_timeout_ms,
            transaction_timeout_ms,
            check_interval_ms,
            check_max,
        )
        workers.run_in_foreground(workers.coordinator(config), metrics_port, _on_termination)
    except AdapterError as exc:
        _fail(exc)


@worker.command("all")
@_common_worker_options
@_delay_levels_option
@_check_options
def worker_all(
    bootstrap: str,
    worker_id: str | None,
    kafka_transaction_timeout_ms: int,
    metrics_port: int | None,
    delay_levels: str,
    transaction_timeout_ms: int,
    check_interval_ms: int,
    check_max: int,
) -> None:
    """The transaction coordinator and the schedule forwarder in one process."""
    from adapter import workers

    try:
        forwarder = _forwarder_config(
            bootstrap, delay_levels, worker_id, kafka_transaction_timeout_ms
        )
        coordinator = _coordinator_config(
            bootstrap,
            worker_id,
            kafka_transaction_timeout_ms,
            transaction_timeout_ms,
            check_interval_ms,
            check_max,
        )
        workers.run_in_foreground(
            workers.all_workers(forwarder, coordinator), metrics_port, _on_termination
        )
    except AdapterError as exc:
        _fail(exc)


@main.group("transactions")
def transactions_group() -> None:
    """Pending and discarded transactional messages."""


@transactions_group.command("list")
@click.option("--bootstrap", envvar="RMQ_ADAPTER_BOOTSTRAP", required=True)
@click.option(
    "--discarded", is_flag=True, help="List TRANS_CHECK_MAX_TIME_TOPIC instead of pending ones."
)
def transactions_list(bootstrap: str, discarded: bool) -> None:
    """Pending half messages with their age, check count and group."""
    from adapter.transaction import admin

    try:
        settings = KafkaSettings.from_env(bootstrap)
        rows = admin.discarded(settings) if discarded else admin.pending(settings)
    except AdapterError as exc:
        _fail(exc)
    click.echo(admin.render(rows, discarded=discarded))


@transactions_group.command("resume")
@click.option("--bootstrap", envvar="RMQ_ADAPTER_BOOTSTRAP", required=True)
@click.argument("transaction_id")
def transactions_resume(bootstrap: str, transaction_id: str) -> None:
    """Put a discarded message back into HALF with its check count reset."""
    from adapter.transaction import admin

    try:
        partition, offset = admin.resume(KafkaSettings.from_env(bootstrap), transaction_id)
    except AdapterError as exc:
        _fail(exc)
    click.echo(f"resumed {transaction_id} as half message {partition}@{offset}")


if __name__ == "__main__":
    main()
