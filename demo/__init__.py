"""`make demo`: a local broker, a RocketMQ-style scenario through the drop-in API, a report."""
