"""The drop-in ``Producer``, its settings, and the send core it shares with
``TransactionMQProducer``."""
