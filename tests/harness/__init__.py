"""Tests of the test suite's own infrastructure (tests/cluster.py, tests/brokers.py), apart from
the product's unit tests."""
