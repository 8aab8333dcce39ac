"""``rmq-adapter exporter`` and ``rmq-adapter monitoring dashboard|alerts``.

The exporter serves consumer lag under rocketmq-exporter's names (:mod:`adapter.ops.exporter`)
on ``--metrics-port`` (5557, rocketmq-exporter's port, by default), with ``/healthz`` and
``/readyz``, until SIGTERM. ``monitoring`` prints the Grafana dashboard and the Prometheus alert
rules shipped in the wheel (``adapter/ops/monitoring/``), over the workers', the proxy's and the
exporter's metrics, so that a deployment takes them from the release it runs.

Known gaps: none.
"""

from __future__ import annotations

from importlib import resources
from typing import Any, cast

import click

from adapter.config import KafkaSettings
from adapter.kafka.worker import AnyWorker
from adapter.ops.options import (
    bootstrap,
    clear_errors,
    metrics_host,
    option,
    stop_timeout,
    timeout,
)

DASHBOARD = "grafana-dashboard.json"
ALERTS = "prometheus-alerts.yml"


def asset(name: str) -> str:
    """A monitoring file shipped in the package."""
    return (resources.files("adapter.ops") / "monitoring" / name).read_text(encoding="utf-8")


@click.command("exporter")
@bootstrap
@option(
    "--interval",
    type=click.FloatRange(min=1),
    default=15.0,
    help="Seconds between two readings of the groups.",
    envvar="RMQ_ADAPTER_EXPORTER_INTERVAL",
)
@metrics_host
@option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=5557,
    help="Port of /metrics, /healthz and /readyz (rocketmq-exporter's by default).",
)
@option("--system-groups", is_flag=True, default=False, help="Export the adapter's groups too.")
@stop_timeout
@timeout
@clear_errors
def exporter_command(**options: Any) -> None:
    """Serve consumer lag to Prometheus under rocketmq-exporter's metric names; SIGTERM stops."""
    from prometheus_client import CollectorRegistry

    from adapter.ops import workers
    from adapter.ops.exporter import ExporterConfig, LagExporter

    config = ExporterConfig(
        KafkaSettings.from_env(options["bootstrap"]),
        interval_s=options["interval"],
        timeout_s=options["timeout"],
        system_groups=options["system_groups"],
    )
    registry = CollectorRegistry()
    workers.run_in_foreground(
        [cast(AnyWorker, LagExporter(config, registry))],
        registry=registry,
        endpoint=workers.Endpoint(options["metrics_host"], options["metrics_port"]),
        install_signals=workers.stop_on_termination,
        stop_timeout_s=options["stop_timeout"],
    )


@click.group("monitoring")
def monitoring_group() -> None:
    """The Grafana dashboard and Prometheus alert rules shipped with this release."""


@monitoring_group.command("dashboard")
def monitoring_dashboard() -> None:
    """Print the Grafana dashboard (JSON, import it in Grafana)."""
    click.echo(asset(DASHBOARD), nl=False)


@monitoring_group.command("alerts")
def monitoring_alerts() -> None:
    """Print the Prometheus alert rules (YAML, a rule file)."""
    click.echo(asset(ALERTS), nl=False)
