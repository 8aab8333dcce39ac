"""The drop-in ``Producer``: ``producer`` (the client), ``sender`` (the send core it shares with
``TransactionMQProducer``), ``routing`` (the queue of an orderly message) and ``config`` (its
settings)."""
