"""Transactional messages: the envelopes, the pure coordinator state and its Kafka worker."""
