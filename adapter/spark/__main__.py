"""``python -m adapter.spark points|telemetry ...``: ``rmq-adapter spark`` by another name."""

import sys

from adapter.ops.cli import main

main(["spark", *sys.argv[1:]])
