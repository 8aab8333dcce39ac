"""Spark Structured Streaming downstream: RocketMQ messages read from the real Kafka topics.

Reproduces what a RocketMQ consumer sees of a message (topic, queue, offset, msg id, keys, tags,
properties, body, born and store times, reconsume times, transaction id, delay level) as Spark
columns, read through Spark's own Kafka source with ``read_committed`` isolation, and the jobs
built on it: the points ledger (:mod:`adapter.spark.points`), the adapter's telemetry
(:mod:`adapter.spark.telemetry`) and the message index (:mod:`adapter.spark.index`). The
submodules are small, one concept each; import them directly (``from adapter.spark import
points``).

This package needs PySpark and Delta Lake, pinned as a pair whose Maven jars resolve (the
``spark`` extra). Importing it without them fails at once with the command that installs them;
nothing else in ``adapter`` imports PySpark.

Known gaps: see each module's docstring.
"""

from __future__ import annotations

_INSTALL = "pip install 'rmq-kafka-adapter[spark]'"

try:
    import delta  # noqa: F401  (delta imports pyspark: a missing pyspark names itself)
    import pyspark  # noqa: F401
except ImportError as exc:
    raise ImportError(
        f"adapter.spark needs PySpark and Delta Lake ({exc.name} is not installed): {_INSTALL}"
    ) from exc
