"""``rmq-adapter``: the command line of the adapter (broker, topics; workers come later).

Not a RocketMQ behaviour by itself: it plays the part of ``mqbroker`` / ``mqadmin`` for a
Kafka-backed deployment. Every option can also be set with an ``RMQ_ADAPTER_*`` environment
variable (``--bootstrap`` is ``RMQ_ADAPTER_BOOTSTRAP``).

Known gaps: no ``mqadmin`` commands beyond those listed in the README.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from adapter import broker as local_broker
from adapter import naming, topics
from adapter.delay import DEFAULT_LEVELS, DelayLevels
from adapter.exceptions import AdapterError


def _fail(exc: Exception) -> None:
    click.echo(f"error: {exc}", err=True)
    sys.exit(1)


@click.group(context_settings={"auto_envvar_prefix": "RMQ_ADAPTER", "show_default": True})
@click.option("--log-level", default="INFO", help="Python log level.")
def main(log_level: str) -> None:
    """RocketMQ transactional and delayed messages on Apache Kafka."""
    logging.basicConfig(
        level=log_level.upper(),
        format='{"ts":"%(asctime)s","level":"%(levelname)s","logger":"%(name)s","msg":"%(message)s"}',
    )


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


if __name__ == "__main__":
    main()
