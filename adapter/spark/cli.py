"""``rmq-adapter spark points|telemetry|index``: the Spark jobs from the command line.

Not a RocketMQ behaviour: the entry point that runs a job on ``local[2]`` or on a cluster
(``--master spark://host:7077``) unchanged. The click group :data:`spark` is meant to be
attached to the ``rmq-adapter`` command (``main.add_command(spark)``); until then
``python -m adapter.spark points ...`` runs it. Every option also reads an environment variable
(``--bootstrap``: ``RMQ_ADAPTER_BOOTSTRAP``; the others ``RMQ_ADAPTER_SPARK_<OPTION>``, see
:mod:`adapter.spark.config`). A continuous run stops cleanly on SIGTERM or Ctrl-C; an
``--available-now`` run processes what Kafka holds and exits. At the end a run prints its
result as tables on standard output (:mod:`adapter.spark.results`; the logs go to standard
error), and ``--json FILE`` writes it as JSON.

Known gaps: no ``spark-submit`` packaging (a Python driver process runs the job; executors need
only the same pyspark version, as the jars travel with the session).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import click

from adapter.exceptions import AdapterError
from adapter.spark.config import Job, SparkJobConfig


def _options(job: Job) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    default_topics = "OrderPaid" if job is Job.POINTS else "every real topic"

    def option(name: str, env: str, help: str, *more: str, **kwargs: Any) -> Any:  # noqa: A002
        envvar = f"RMQ_ADAPTER_{env}"
        return click.option(name, *more, envvar=envvar, show_envvar=True, help=help, **kwargs)

    path = click.Path(path_type=Path)
    decorators = [
        option("--bootstrap", "BOOTSTRAP", "Kafka bootstrap servers.", required=True),
        option("--master", "SPARK_MASTER", "Spark master URL.  [default: local[2]]"),
        option(
            "--checkpoint", "SPARK_CHECKPOINT",
            f"Streaming checkpoint directory.  [default: .rmq-spark/{job}/checkpoint]", type=path,
        ),
        option(
            "--table", "SPARK_TABLE",
            f"Delta table (directory).  [default: .rmq-spark/{job}/table]", type=path,
        ),
        option(
            "--trigger-ms", "SPARK_TRIGGER_MS",
            "Processing-time trigger in ms.  [default: 250 points, 5000 the others]", type=int,
        ),
        option(
            "--available-now", "SPARK_AVAILABLE_NOW",
            "Process what Kafka holds now, then exit.", is_flag=True, default=None,
        ),
        option(
            "--topic", "SPARK_TOPICS",
            f"RocketMQ topic to read (repeatable).  [default: {default_topics}]",
            "topics", multiple=True,
        ),
        option(
            "--jars-dir", "SPARK_JARS",
            "Directory of the extra jars.  [default: infra/.jars/spark]", type=path,
        ),
        option(
            "--starting-offsets", "SPARK_STARTING_OFFSETS",
            "Where a new checkpoint starts.  [default: earliest]",
            type=click.Choice(["earliest", "latest"]),
        ),
        option(
            "--json", "SPARK_JSON", "Also write the result as JSON to this file.",
            "json_file", type=path,
        ),
    ]  # fmt: skip

    def apply(function: Callable[..., Any]) -> Callable[..., Any]:
        for decorator in reversed(decorators):
            function = decorator(function)
        return function

    return apply


def _config(job: Job, options: dict[str, Any]) -> SparkJobConfig:
    topics = tuple(t for value in options.pop("topics") or () for t in value.split(",") if t)
    return SparkJobConfig.from_env(job, topics=topics or None, **options)


def _stop_on_signals() -> threading.Event:
    stop = threading.Event()

    def handler(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    return stop


def _run(job: Job, options: dict[str, Any]) -> None:
    from adapter.spark.results import as_json, format_points, format_telemetry

    json_file: Path | None = options.pop("json_file")
    try:
        config = _config(job, options)
        stop = _stop_on_signals()
        if job is Job.POINTS:
            from adapter.spark.points import run_points

            result: Any = run_points(config, stop=stop)
        elif job is Job.INDEX:
            from adapter.spark.index import format_index, run_index

            result = run_index(config, stop=stop)
        else:
            from adapter.spark.telemetry import run_telemetry

            result = run_telemetry(config, stop=stop)
    except AdapterError as exc:
        raise click.ClickException(str(exc)) from exc
    if json_file is not None:
        json_file.parent.mkdir(parents=True, exist_ok=True)
        json_file.write_text(as_json(job.value, result) + "\n")
    if job is Job.INDEX:
        click.echo(format_index(result))
    else:
        click.echo(format_points(result) if job is Job.POINTS else format_telemetry(result))


@click.group("spark")
def spark() -> None:
    """Spark Structured Streaming jobs on the real topics (pyspark, Delta Lake)."""


@spark.command("points")
@_options(Job.POINTS)
def points(**options: Any) -> None:
    """Credit member points from committed OrderPaid messages into a Delta ledger."""
    _run(Job.POINTS, options)


@spark.command("telemetry")
@_options(Job.TELEMETRY)
def telemetry(**options: Any) -> None:
    """Delay lateness per level and transaction outcomes into small Delta tables."""
    _run(Job.TELEMETRY, options)


@spark.command("index")
@_options(Job.INDEX)
def index(**options: Any) -> None:
    """Index every message's id, keys, tag and Kafka place into a Delta table, for
    ``rmq-adapter message query|show --index``."""
    _run(Job.INDEX, options)
