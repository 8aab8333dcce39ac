"""``rmq-adapter proxy``: RocketMQ 5.x's gRPC protocol (``apache.rocketmq.v2``) on Kafka.

Every official RocketMQ 5.x client, in any language, speaks one protocol to RocketMQ's proxy.
This package serves that protocol on the adapter's cores, so that a 5.x application moves to
Kafka by changing its endpoint: :mod:`~adapter.proxy.server` runs it, one module per RPC group
(:mod:`~adapter.proxy.routes`, :mod:`~adapter.proxy.telemetry`, :mod:`~adapter.proxy.sends`,
:mod:`~adapter.proxy.transactions`, :mod:`~adapter.proxy.receives`), with its codes, auth, TLS,
sessions, metrics and peers (other proxies settling what this one handed out) beside.
It is an install extra (``rmq-kafka-adapter[proxy]``): grpcio and the official client's
generated protocol modules.
"""
