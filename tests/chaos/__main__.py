"""``python -m tests.chaos``: see :mod:`tests.chaos.run`."""

from tests.chaos.run import main

main()
