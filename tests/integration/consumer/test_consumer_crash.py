"""No loss across a consumer killed with SIGKILL mid-stream, as a process or in a container."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from adapter.client import Message
from tests.support import wait_until
from tests.workers import start_worker

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]


def lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_a_consumer_killed_mid_stream_loses_nothing_after_a_restart(
    kafka_bootstrap: str, make_producer, new_topic, new_group, tmp_path: Path
) -> None:
    topic = new_topic(partitions=4)
    group = new_group()
    producer = make_producer()
    expected = [f"m{i}" for i in range(400)]
    for body in expected:
        message = Message(topic)
        message.set_body(body)
        producer.send_oneway(message)
    assert producer.flush() == 0

    out = tmp_path / "consumed.txt"

    def consumer(delay: float):
        worker = start_worker(
            "process",  # the image's SIGKILL: the coordinator's crash test
            "tests.procs.consume_to_file",
            *(kafka_bootstrap, group, topic, str(out), str(delay)),
            mounts=(tmp_path,),
        )
        worker.wait_for_output("started")
        return worker

    first = consumer(delay=0.01)
    try:
        wait_until(lambda: len(lines(out)) >= 100, timeout=60, what="100 consumed before the kill")
    finally:
        first.kill()
    consumed_before_kill = len(lines(out))
    assert consumed_before_kill < len(expected), "the kill came mid-stream"

    second = consumer(delay=0.0)
    try:
        wait_until(lambda: set(lines(out)) >= set(expected), timeout=90, what="every message")
    finally:
        assert second.terminate() == 0, "the restarted consumer stops cleanly on SIGTERM"

    counts = Counter(lines(out))
    assert set(counts) == set(expected), "no message was lost and none invented"
    # At-least-once: duplicates are only what the killed process had not yet committed
    # (at most one commit interval of work plus what was in flight).
    duplicates = sum(c - 1 for c in counts.values())
    assert duplicates <= consumed_before_kill
