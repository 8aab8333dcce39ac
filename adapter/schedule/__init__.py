"""Delayed messages: RocketMQ's ``SCHEDULE_TOPIC_XXXX`` and its delivery service, on Kafka.

``due`` and ``head_of_line`` are pure (due-time maths and the per-level head-of-line queue);
``envelope`` turns messages into ``ScheduledMessage`` records and back; ``forwarder`` is the
Kafka shell (the ``rmq-adapter worker schedule`` process).
"""
