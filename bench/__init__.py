"""Benchmarks that print their numbers; results go into BENCHMARKS.md with the date."""
