"""Operating the adapter: the ``rmq-adapter`` command, worker runner, status, local broker."""
