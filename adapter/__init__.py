"""rmq-kafka-adapter: RocketMQ's transactional and delayed messages on Apache Kafka.

The drop-in client lives in :mod:`adapter.client` and :mod:`adapter.exceptions`.
"""

__version__ = "0.1.0"
