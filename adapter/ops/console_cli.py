"""``rmq-adapter console``: the web console, in the foreground.

Not a RocketMQ behaviour by itself: it plays the part of rocketmq-dashboard (see
:mod:`adapter.console`). Every option also reads an ``RMQ_ADAPTER_*`` variable (``--help``
names each), and its Kafka clients take the ``RMQ_ADAPTER_KAFKA_*`` settings. It listens on
127.0.0.1 unless ``--listen`` says otherwise, and refuses any other address without ``--token``
or ``--users``. The overview shows the proxies given with ``--proxy`` (their metrics ports, as
rocketmq-dashboard lists its configured proxies), and the message page answers from the message
index when ``--index`` is given. ``--listen``, ``--token``, ``--users`` and ``--proxy`` read
``RMQ_ADAPTER_CONSOLE_*``: the proxy's ``--listen`` and
``--users`` read ``RMQ_ADAPTER_LISTEN`` and ``RMQ_ADAPTER_USERS``, and one environment may set
both. The console is an install extra (``rmq-kafka-adapter[console]``); without it the command
says what to install.

Known gaps: none.
"""

from __future__ import annotations

from pathlib import Path

import click

from adapter.config import KafkaSettings
from adapter.delay import DelayLevels
from adapter.exceptions import AdapterError
from adapter.ops.options import bootstrap, delay_levels, message_index, option, timeout

__all__ = ["console_command"]


@click.command("console", context_settings={"show_default": True})
@bootstrap
@option(
    "--listen",
    envvar="RMQ_ADAPTER_CONSOLE_LISTEN",
    default="127.0.0.1:8088",
    help="HOST:PORT to serve on; any address but loopback needs --token or --users.",
)
@option(
    "--token",
    envvar="RMQ_ADAPTER_CONSOLE_TOKEN",
    default=None,
    help="A secret the browser signs in with once (or scripts send as a Bearer token).",
)
@option(
    "--users",
    envvar="RMQ_ADAPTER_CONSOLE_USERS",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="File of NAME:scrypt$SALT$HASH lines: HTTP Basic sign-in.",
)
@click.option(
    "--proxy",
    "proxies",
    envvar="RMQ_ADAPTER_CONSOLE_PROXIES",
    show_envvar=True,
    multiple=True,
    help="A proxy's metrics HOST:PORT, for the overview (repeat it; the variable: spaces).",
)
@message_index
@delay_levels
@timeout
def console_command(
    bootstrap: str,
    listen: str,
    token: str | None,
    users: Path | None,
    proxies: tuple[str, ...],
    index: Path | None,
    delay_levels: str,
    timeout: float,
) -> None:
    """Serve the web console: overview, transactions, delays, messages, consumer groups and
    dead letters. SIGTERM (or Ctrl-C) stops it."""
    from adapter.ops import workers

    try:
        from adapter.console.auth import Users
        from adapter.console.config import ConsoleConfig, parse_listen
        from adapter.console.server import serve
    except ImportError as exc:
        raise click.ClickException(
            f"{exc}; install the console extra: pip install 'rmq-kafka-adapter[console]'"
        ) from exc
    try:
        host, port = parse_listen(listen)
        config = ConsoleConfig(
            KafkaSettings.from_env(bootstrap),
            host,
            port,
            token=token,
            users=None if users is None else Users.load(users),
            timeout_s=timeout,
            levels=DelayLevels.parse(delay_levels),
            proxies=proxies,
            index=index,
        )
        serve(config, workers.stop_on_termination, lambda line: click.echo(line))
    except AdapterError as exc:
        raise click.ClickException(str(exc)) from exc
