"""The drop-in ``Producer`` and the send core it shares with ``TransactionMQProducer``."""
