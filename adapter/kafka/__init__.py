"""The Kafka plumbing every part shares: clients, I/O helpers, topics, the exactly-once worker."""
