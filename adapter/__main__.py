"""``python -m adapter``: the ``rmq-adapter`` command."""

from adapter.ops.cli import main

main()
