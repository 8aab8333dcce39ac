"""``python -m adapter.spark points|telemetry ...``: the Spark CLI before it joins rmq-adapter."""

from adapter.spark.cli import spark

if __name__ == "__main__":
    spark(prog_name="rmq-adapter spark")
