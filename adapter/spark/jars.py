"""The local jars a Spark job needs beyond PySpark, and Java: found, fetched, checked, named.

Not a RocketMQ behaviour: this is how the jobs keep "nothing is downloaded behind your back".
The jars (Spark's Kafka source and spark-avro for the pinned PySpark, Delta Lake, their own
dependencies) are handed to the session as local files (``spark.jars``), never as
``--packages``. First found wins: ``--jars-dir`` / ``RMQ_ADAPTER_SPARK_JARS``, a checkout's
``infra/.jars/spark`` (``make jars``: Maven, ``infra/spark/pom.xml``), else the user cache,
which the first run fills from Maven Central with the jars ``jars.lock`` pins, checksums
checked, progress on standard error (:mod:`adapter.jars`). A missing jar or a missing Java
fails before the JVM starts, with what is missing and how to get it.

Known gaps: a directory named by the option or the variable is checked by file name (the
pinned versions), not by checksum; a cluster's workers must run the same PySpark version
(their classpath is their own ``pyspark/jars``).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pyspark

from adapter import jars
from adapter.exceptions import AdapterError

SPARK_VERSION = "4.1.1"
DELTA_VERSION = "4.3.1"
SCALA = "2.13"

ENV_JARS = "RMQ_ADAPTER_SPARK_JARS"
FETCH_COMMAND = (
    f"make jars in a checkout, or leave out --jars-dir and {ENV_JARS} to fetch them into "
    "the user cache"
)
JAVA_COMMAND = "apt-get install openjdk-17-jre-headless  (or set JAVA_HOME to a Java 17 or 21)"

_CHECKOUT_JARS = Path(__file__).resolve().parents[2] / "infra" / ".jars" / "spark"

# (Maven coordinates, file name pattern) of every jar the jobs cannot run without.
REQUIRED: tuple[tuple[str, str], ...] = (
    (
        f"org.apache.spark:spark-sql-kafka-0-10_{SCALA}:{SPARK_VERSION}",
        f"spark-sql-kafka-0-10_{SCALA}-{SPARK_VERSION}.jar",
    ),
    (
        f"org.apache.spark:spark-token-provider-kafka-0-10_{SCALA}:{SPARK_VERSION}",
        f"spark-token-provider-kafka-0-10_{SCALA}-{SPARK_VERSION}.jar",
    ),
    ("org.apache.kafka:kafka-clients", "kafka-clients-*.jar"),
    ("org.apache.commons:commons-pool2", "commons-pool2-*.jar"),
    (
        f"org.apache.spark:spark-avro_{SCALA}:{SPARK_VERSION}",
        f"spark-avro_{SCALA}-{SPARK_VERSION}.jar",
    ),
    (
        f"io.delta:delta-spark_4.1_{SCALA}:{DELTA_VERSION}",
        f"delta-spark_4.1_{SCALA}-{DELTA_VERSION}.jar",
    ),
    (f"io.delta:delta-storage:{DELTA_VERSION}", f"delta-storage-{DELTA_VERSION}.jar"),
)


class SparkSetupError(AdapterError):
    """Java, a jar or the right PySpark is missing; the message says how to get it."""


@dataclass(frozen=True, slots=True)
class Jars:
    directory: Path
    paths: tuple[Path, ...]
    """Every jar of the directory (the required ones and their dependencies), sorted."""

    @property
    def spark_jars(self) -> str:
        """The ``spark.jars`` value: local paths, comma separated."""
        return ",".join(str(p) for p in self.paths)


def jar_lock() -> jars.Lock:
    """The jars the jobs need beyond PySpark's own, pinned (package data)."""
    return jars.Lock.parse(Path(__file__).with_name("jars.lock").read_text())


def jars_dir(configured: Path | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """The jar directory: ``configured``, else ``RMQ_ADAPTER_SPARK_JARS``, else the checkout's
    ``infra/.jars/spark`` when it holds jars, else the user cache's (see :func:`locate`)."""
    env = os.environ if environ is None else environ
    if configured is not None:
        return configured
    if env.get(ENV_JARS):
        return Path(env[ENV_JARS])
    if any(_CHECKOUT_JARS.glob("*.jar")):
        return _CHECKOUT_JARS
    return jars.cache_root(env) / jar_lock().name


def _fetched(directory: Path, environ: Mapping[str, str]) -> Path:
    """``directory``, filled from Maven Central first when it is the user cache's."""
    lock = jar_lock()
    if directory != jars.cache_root(environ) / lock.name:
        return directory
    progress = jars.TextProgress(sys.stderr, f"the Spark jobs' jars ({lock.name})")
    return jars.ensure(
        lock,
        directory,
        repository_url=jars.repository(environ),
        progress=progress,
        on_start=progress.start,
    )


def locate(configured: Path | None = None) -> Jars:
    """The extra jars, checked: every required one is there and PySpark is the pinned version;
    fetched into the user cache first when neither a directory nor a checkout has them.

    Raises:
        adapter.jars.JarsError: a jar could not be fetched or is not the pinned file.
        SparkSetupError: naming each missing jar (Maven coordinates and file name) and the
            command that fetches them, or the PySpark version mismatch.
    """
    if pyspark.__version__ != SPARK_VERSION:
        raise SparkSetupError(
            f"PySpark {pyspark.__version__} is installed, but the jars are pinned to Spark "
            f"{SPARK_VERSION}: pip install 'rmq-kafka-adapter[spark]' (pyspark=={SPARK_VERSION})"
        )
    directory = _fetched(jars_dir(configured), os.environ)
    found = sorted(directory.glob("*.jar")) if directory.is_dir() else []
    missing = [
        f"{coordinates} ({pattern})"
        for coordinates, pattern in REQUIRED
        if not any(p.match(pattern) for p in found)
    ]
    if missing:
        where = "is empty" if directory.is_dir() else "does not exist"
        if found:
            where = "lacks them"
        raise SparkSetupError(
            f"the Spark jobs' jars are missing from {directory} (it {where}): "
            + "; ".join(missing)
            + f". Fetch them with: {FETCH_COMMAND}"
            + (f", or point {ENV_JARS} at a directory holding them" if configured is None else "")
        )
    return Jars(directory=directory, paths=tuple(found))


def java_executable() -> Path:
    """The ``java`` PySpark will start: ``$JAVA_HOME/bin/java``, else the first on ``PATH``.

    Raises:
        SparkSetupError: Java is not installed (or ``JAVA_HOME`` points at no Java), with the
            command that installs it.
    """
    home = os.environ.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        if java.is_file() and os.access(java, os.X_OK):
            return java
        raise SparkSetupError(
            f"JAVA_HOME={home} holds no bin/java; Spark needs Java 17 or 21: {JAVA_COMMAND}"
        )
    found = shutil.which("java")
    if found is None:
        raise SparkSetupError(f"Java is missing (no java on PATH); Spark needs it: {JAVA_COMMAND}")
    return Path(found)
