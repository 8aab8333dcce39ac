"""``rmq-adapter proxy``: RocketMQ 5.x's gRPC protocol on Kafka, in the foreground.

Not a RocketMQ behaviour by itself: it plays the part of RocketMQ's ``mqproxy`` command. Like
the workers, every option also reads an ``RMQ_ADAPTER_*`` variable (``--help`` names each),
every Kafka client of the proxy takes the ``RMQ_ADAPTER_KAFKA_*`` settings, ``/metrics``,
``/healthz`` and ``/readyz`` are served on ``--metrics-port``, and SIGTERM stops it cleanly
(:mod:`adapter.ops.workers` runs it). The proxy itself is :mod:`adapter.proxy`, an install
extra (``rmq-kafka-adapter[proxy]``); without it the command says what to install.

Known gaps: none.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import click

from adapter.config import KafkaSettings, default_worker_id
from adapter.exceptions import AdapterError
from adapter.kafka.worker import AnyWorker

__all__ = ["proxy_command"]

_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


F = TypeVar("F", bound=Callable[..., Any])


def _option(name: str, help: str, **kwargs: Any) -> Callable[[F], F]:
    envvar = "RMQ_ADAPTER_" + name.lstrip("-").upper().replace("-", "_")
    return click.option(name, envvar=envvar, show_envvar=True, help=help, **kwargs)


@click.command("proxy", context_settings={"show_default": True})
@_option("--bootstrap", "Kafka bootstrap servers (host:port[,host:port...]).", required=True)
@_option("--listen", "Address of the gRPC port (TLS and plaintext).", default="0.0.0.0:8081")
@_option(
    "--metrics-host",
    "Address of the metrics and probes endpoint (0.0.0.0 in a container).",
    default="127.0.0.1",
)
@_option(
    "--metrics-port",
    "Port of /metrics, /healthz and /readyz (none when not set).",
    type=click.IntRange(0, 65535),
    default=None,
)
@_option(
    "--users", "TOML file of access keys and permissions; auth is off without one.", type=_FILE
)
@_option("--tls-cert", "PEM certificate chain (default: self-signed, made at start).", type=_FILE)
@_option("--tls-key", "PEM private key of --tls-cert.", type=_FILE)
@_option(
    "--topic-types",
    "Message types topics accept: TOPIC=TYPE[+TYPE],... (default: every type).",
    default="",
)
@_option(
    "--max-inflight",
    "Messages sent at once; past it a send is answered TOO_MANY_REQUESTS.",
    type=click.IntRange(min=1),
    default=2000,
)
@_option(
    "--plaintext",
    "Plaintext only, served by gRPC itself: faster per call; for clients with TLS off.",
    is_flag=True,
)
@_option("--reuse-port", "Share --listen with other proxies on this host.", is_flag=True)
@_option(
    "--fifo-groups",
    "Consumer groups that keep each message group's order (RocketMQ's consumeMessageOrderly), "
    "comma-separated.",
    default="",
)
@_option(
    "--peer-listen",
    "Address where the other proxies settle the messages this one handed out (plaintext).",
    default="127.0.0.1:0",
)
@_option(
    "--peer-advertise",
    "The address the other proxies reach --peer-listen by (needed when it binds 0.0.0.0).",
    default=None,
)
@_option(
    "--peer-networks",
    "Networks (CIDR, comma-separated) a receipt handle's proxy may be in.",
    default="127.0.0.0/8,::1/128",
)
@_option(
    "--stop-timeout",
    "Seconds a stop may take (calls in flight get half) before the process exits.",
    type=click.FloatRange(min=1),
    default=30.0,
)
def proxy_command(**options: Any) -> None:
    """Serve RocketMQ 5.x's gRPC protocol on Kafka: a 5.x client in any language sends
    through it with only its endpoint changed. SIGTERM (or Ctrl-C) stops it cleanly."""
    from prometheus_client import CollectorRegistry

    from adapter.ops import workers

    try:
        from adapter.proxy.config import (
            ProxyConfig,
            parse_address,
            parse_networks,
            parse_topic_types,
        )
        from adapter.proxy.server import ProxyServer
    except ImportError as exc:
        raise click.ClickException(
            f"{exc}; install the proxy extra: pip install 'rmq-kafka-adapter[proxy]'"
        ) from exc
    try:
        config = ProxyConfig(
            KafkaSettings.from_env(options["bootstrap"]),
            listen=parse_address(options["listen"]),
            instance_id=default_worker_id(),
            users_file=options["users"],
            tls_cert=options["tls_cert"],
            tls_key=options["tls_key"],
            plaintext=options["plaintext"],
            reuse_port=options["reuse_port"],
            stop_timeout_s=options["stop_timeout"],
            max_inflight=options["max_inflight"],
            topic_types=parse_topic_types(options["topic_types"]),
            fifo_groups=frozenset(
                g.strip() for g in options["fifo_groups"].split(",") if g.strip()
            ),
            peer_listen=parse_address(options["peer_listen"]),
            peer_advertise=(
                parse_address(options["peer_advertise"]) if options["peer_advertise"] else None
            ),
            peer_networks=parse_networks(options["peer_networks"]),
        )
        registry = CollectorRegistry()
        port = options["metrics_port"]
        workers.run_in_foreground(
            [cast(AnyWorker, ProxyServer(config, registry))],
            registry=registry,
            endpoint=None if port is None else workers.Endpoint(options["metrics_host"], port),
            install_signals=workers.stop_on_termination,
            stop_timeout_s=options["stop_timeout"],
        )
    except AdapterError as exc:
        raise click.ClickException(str(exc)) from exc
