"""The Kafka plumbing every part shares.

``clients`` (consumers, producers and admin clients, their logs through Python logging),
``io`` (fetching, producing with an acknowledgement, reading back, offsets), ``topics`` (the
system topics and their layout), ``schemas`` (the Avro schemas' registration), ``transactor``
(a worker's transactional producer, under a watchdog), ``worker`` (the exactly-once worker:
turns, failures, health), ``worker_config`` (what every worker is configured with) and
``rereads`` (records a consumer delivered again).
"""
