"""The Kafka plumbing every part shares.

``clients`` (consumers, producers and admin clients, their logs through Python logging),
``reading`` (fetching, reading back to the end, decoding a system record), ``writing``
(producing within a deadline, with an acknowledgement), ``metadata`` (partition counts,
committed offsets, visible topics), ``priority_bands`` (the Kafka topics of a topic made for
priorities), ``retry`` (asking Kafka again, on tenacity), ``topics`` (the system topics and
their layout), ``schemas`` (the Avro schemas' registration), ``transactor``
(a worker's transactional producer, under a watchdog), ``worker`` (the exactly-once worker:
turns, failures, health), ``worker_config`` (what every worker is configured with) and
``rereads`` (records a consumer delivered again).
"""
