"""No loss across a consumer killed with SIGKILL mid-stream."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from adapter.client import Message
from tests.support import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]


def start_consumer(
    bootstrap: str, group: str, topic: str, out: Path, delay: float
) -> subprocess.Popen:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.procs.consume_to_file",
            bootstrap,
            group,
            topic,
            str(out),
            str(delay),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "started"
    return process


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
    first = start_consumer(kafka_bootstrap, group, topic, out, delay=0.01)
    try:
        wait_until(lambda: len(lines(out)) >= 100, timeout=60, what="100 consumed before the kill")
    finally:
        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
    consumed_before_kill = len(lines(out))
    assert consumed_before_kill < len(expected), "the kill came mid-stream"

    second = start_consumer(kafka_bootstrap, group, topic, out, delay=0.0)
    try:
        wait_until(lambda: set(lines(out)) >= set(expected), timeout=90, what="every message")
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(30)

    counts = Counter(lines(out))
    assert set(counts) == set(expected), "no message was lost and none invented"
    # At-least-once: duplicates are only what the killed process had not yet committed
    # (at most one commit interval of work plus what was in flight).
    duplicates = sum(c - 1 for c in counts.values())
    assert duplicates <= consumed_before_kill
