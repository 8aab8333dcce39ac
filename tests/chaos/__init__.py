"""Chaos as RocketMQ itself is tested (openchaos, the Jepsen test): a nemesis injects faults into
the three-broker cluster and the workers while clients record a history of every operation; a
checker reads the whole history afterwards.

Modules: ``history`` (what the clients did and saw), ``checker`` (lost, duplicated, recovered,
unexpected, early, out of order, recovery times), ``report`` (the table and the lateness chart).
"""
