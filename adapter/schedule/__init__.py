"""Delayed and timer messages: RocketMQ's ``SCHEDULE_TOPIC_XXXX`` and its delivery, on Kafka.

Pure: ``due`` (due-time maths, clocks on two hosts), ``timer`` (a timer's next hop),
``head_of_line`` (the per-level queue of waiting records), ``intake`` (reading one SCHEDULE
record), ``held`` (what is held and what is produced for it), ``plan`` (one batch: what to
deliver, hop, set aside or park), ``aside`` (a record whose topic is missing),
``destinations`` (where the forwarder refuses to deliver), ``signing`` and ``grants`` (which
application wrote a record, and which topics it may reach), ``refusals`` (retry or park),
``recall`` (recall handles, and who wins a recall racing a delivery) and ``envelope`` (messages
to ``ScheduledMessage`` records and back).

The Kafka shell: ``forwarder`` (the ``rmq-adapter worker schedule`` process, its settings in
``config``), ``transit`` (one batch in its transaction), ``prepared`` (a batch prepared ahead of
its due time), ``broker_clock`` (who stamps SCHEDULE, and how far ahead), ``recall_log`` (the
recall topic) and ``metrics``.
"""
