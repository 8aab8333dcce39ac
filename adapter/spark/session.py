"""The SparkSession of a job: local jars, Delta Lake, settings for a small machine, quiet logs.

Not a RocketMQ behaviour: the plumbing every job shares. The session runs on ``local[2]`` or on
the cluster named by ``--master`` (the same code either way). The extra jars are local files
(``spark.jars``; the driver serves them to executors), checked before the JVM starts
(:mod:`adapter.spark.jars`). Delta Lake comes in through its SQL extension and catalog. Shuffle
and Delta snapshot partitions are 2 (the defaults, 200 and 50, make every MERGE a 50-task stage
on two cores); the UI is off. On a local master the driver binds to 127.0.0.1
(``SPARK_LOCAL_IP``). Spark's own log4j output is cut to warnings by ``log4j2.properties``
beside this module.

Known gaps: the JVM settings (driver memory, log configuration) apply only when this call
starts the JVM; a session that already runs in the process is reused as it is, with the
job-level settings re-applied.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

from adapter.spark.config import SparkJobConfig
from adapter.spark.jars import java_executable, locate
from adapter.spark.jvm_log import forward_in_background

log = logging.getLogger(__name__)

LOG4J_CONFIG = Path(__file__).resolve().parent / "log4j2.properties"

# Settings that may change on a running session (the rest need a new JVM).
SQL_SETTINGS = {
    "spark.sql.shuffle.partitions": "2",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.streaming.stopGracefullyOnShutdown": "true",
    # The sink's MERGE source is one Kafka micro-batch: a fixed offset range of committed
    # records, so it reads the same rows each time and Delta need not copy it first ("auto"
    # materialises any non-Delta source: a second pass, ~0.5 s a batch on two cores).
    "spark.databricks.delta.merge.materializeSource": "none",
    "spark.sql.debug.maxToStringFields": "200",
}


def _is_loopback(master: str) -> bool:
    return master.startswith("local") or "127.0.0.1" in master or "localhost" in master


def build_session(config: SparkJobConfig) -> SparkSession:
    """The session for ``config``: checks Java and the jars first, then gets or creates it.

    Raises:
        adapter.spark.jars.SparkSetupError: Java or a jar is missing (before any JVM starts).
    """
    java_executable()
    jars = locate(config.jars_dir)
    if _is_loopback(config.master):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # py4j logs a foreachBatch failure as an ERROR with its traceback; the same failure ends
    # the query and is raised by await_query, so py4j's copy (and its chatter) is cut.
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    java_options = f"-Dlog4j2.configurationFile=file:{LOG4J_CONFIG} {config.java_options}".strip()
    settings = {
        "spark.app.name": f"rmq-adapter-{config.job.value}",
        "spark.master": config.master,
        "spark.jars": jars.spark_jars,
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.memory": config.driver_memory,
        "spark.driver.extraJavaOptions": java_options,
        "spark.executor.extraJavaOptions": java_options,
        "spark.default.parallelism": "2",
        **SQL_SETTINGS,
    }
    if _is_loopback(config.master):
        settings.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"})
    conf = SparkConf().setAll(list(settings.items()))
    with _own_sigint():
        _launch_driver_jvm(conf)
        spark = SparkSession.builder.config(conf=conf).getOrCreate()
    for key, value in SQL_SETTINGS.items():
        spark.conf.set(key, value)
    spark.sparkContext.setLogLevel("WARN")
    log.info(
        "spark session ready",
        extra={
            "master": spark.sparkContext.master,
            "jars": len(jars.paths),
            "spark": spark.version,
        },
    )
    return spark


@contextlib.contextmanager
def session_for(config: SparkJobConfig, spark: SparkSession | None) -> Iterator[SparkSession]:
    """``spark`` if given (it stays open), else a session built for ``config`` and stopped at
    the end (:func:`stop_session`): how a job's ``run_*`` function gets its session."""
    if spark is not None:
        yield spark
        return
    session = build_session(config)
    try:
        yield session
    finally:
        stop_session(session)


@contextlib.contextmanager
def _own_sigint() -> Iterator[None]:
    """Keep the process's SIGINT handler across the SparkContext's start: PySpark installs
    one that cancels every job and raises ``KeyboardInterrupt`` wherever the main thread is,
    so Ctrl-C on a streaming job would abort it mid-batch (click's "Aborted!", exit 1) instead
    of stopping it between batches, as SIGTERM does (:mod:`adapter.spark.cli`)."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if main else None
    try:
        yield
    finally:
        if main and previous is not None:
            signal.signal(signal.SIGINT, previous)


def _launch_driver_jvm(conf: SparkConf) -> None:
    """Start the driver JVM with its standard error piped into Python logging
    (:mod:`adapter.spark.jvm_log`), unless this process runs one already."""
    if SparkContext._gateway is not None:
        return
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})  # type: ignore[no-untyped-call]
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)
    stderr = getattr(getattr(gateway, "proc", None), "stderr", None)
    if stderr is not None:
        forward_in_background(stderr)


def stop_session(spark: SparkSession, timeout_s: float = 30.0) -> None:
    """Stop ``spark`` and, when this process launched its driver JVM, end the JVM and wait
    until it has exited (up to ``timeout_s``, then kill it): ``SparkSession.stop`` returns
    while the JVM still runs, for seconds, and a caller that returns then leaves it behind."""
    gateway = getattr(spark.sparkContext, "_gateway", None)
    proc = getattr(gateway, "proc", None)
    spark.stop()
    if proc is None:
        return
    with contextlib.suppress(Exception):  # the gateway may already be gone
        gateway.shutdown()  # type: ignore[union-attr]
    SparkContext._gateway = None
    SparkContext._jvm = None
    with contextlib.suppress(OSError, AttributeError, ValueError):
        proc.stdin.close()  # the JVM (PythonGatewayServer) exits when its standard input ends
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        log.warning(
            "the driver JVM had not exited %.0f s after the session stopped; killed", timeout_s
        )
        proc.kill()
        proc.wait(10)


def driver_jvm_pid(spark: SparkSession) -> int | None:
    """The PID of the driver's JVM when this process launched it (PySpark's gateway), else
    ``None``; the benchmark reads its peak RSS."""
    gateway = getattr(spark.sparkContext, "_gateway", None)
    proc = getattr(gateway, "proc", None)
    pid = getattr(proc, "pid", None)
    return int(pid) if pid is not None else None
