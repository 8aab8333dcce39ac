"""``rmq-adapter broker start|stop``: the local development broker from the command line.

Not a RocketMQ behaviour: it plays ``mqnamesrv`` + ``mqbroker`` for a developer
(:mod:`adapter.ops.broker`). ``start`` returns once the broker accepts connections and prints
its address on standard output; the first start outside a checkout fetches the pinned Kafka
jars into the user cache, with its progress on standard error.

Known gaps: none.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from adapter import jars
from adapter.ops import broker as local_broker
from adapter.ops.options import clear_errors, option


@click.group()
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
@option(
    "--jars-dir",
    "Directory of the Kafka jars.  [default: the user cache, fetched from Maven Central once]",
    envvar=local_broker.ENV_JARS,
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    show_default=False,
)
@clear_errors
def broker_start(data_dir: Path, port: int, timeout: float, jars_dir: Path | None) -> None:
    """Start the broker in the background; print its bootstrap address when it is ready."""
    what = f"the Kafka broker's jars ({local_broker.jar_lock().name})"
    progress = jars.TextProgress(sys.stderr, what)
    config = local_broker.BrokerConfig(
        data_dir, port=port, start_timeout_s=timeout, jars_dir=jars_dir
    )
    click.echo(local_broker.start(config, progress))


@broker.command("stop")
@_data_dir
def broker_stop(data_dir: Path) -> None:
    """Stop the broker started from DATA_DIR (by its PID)."""
    if local_broker.stop(data_dir):
        click.echo(f"stopped the broker of {data_dir}")
    else:
        click.echo(f"no broker was running from {data_dir}")
