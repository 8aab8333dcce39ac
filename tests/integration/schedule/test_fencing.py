"""A forwarder frozen past its session timeout (a zombie) is fenced when it wakes.

SIGSTOP freezes a forwarder mid-burst of delayed messages, holding levels and perhaps an open
Kafka transaction; its session (10 s) expires and the other forwarder takes its levels and
forwards what it had not. Woken, the zombie is out of the group and its transaction refused:
nothing is forwarded twice, and it rejoins and works on.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from adapter.client import Message
from tests.support import read_committed, unique, wait_until
from tests.workers import ProcessWorker, start_schedule_forwarder

pytestmark = [pytest.mark.timeout(300), pytest.mark.long]

PAUSED_S = 16.0
"""Past the workers' 10 s session timeout, and past their Kafka transaction timeout."""


def test_a_forwarder_frozen_past_its_session_is_fenced_and_forwards_nothing_twice(
    system_topics: str, make_producer, new_topic
) -> None:
    topic = new_topic(partitions=2)
    producer = make_producer()
    bodies = [f"d{i}" for i in range(1500)]

    def send_over_twenty_seconds() -> None:
        for i, body in enumerate(bodies):
            msg = Message(topic)
            msg.set_body(body)
            msg.set_delay_time_level(1 + i % 3)  # 1 s, 5 s and 10 s: levels both may hold
            producer.send_oneway(msg)
            if i % 10 == 9:
                time.sleep(0.13)
        producer.flush()

    zombie = start_schedule_forwarder(system_topics, unique("zombie"))
    survivor = start_schedule_forwarder(system_topics, unique("survivor"))
    assert isinstance(zombie, ProcessWorker)
    sender = threading.Thread(target=send_over_twenty_seconds)
    sender.start()
    try:
        wait_until(
            lambda: len(read_committed(system_topics, topic, 100, timeout=0.5)) >= 100,
            timeout=90,
            what="forwarding under way",
        )
        assert sender.is_alive(), "the freeze comes mid-burst"
        woken = zombie.freeze_past_session(PAUSED_S, "lost levels")
        sender.join(120)
        read_committed(system_topics, topic, len(bodies), timeout=150)
        wait_until(
            lambda: zombie.printed_since(woken, "assigned levels"),
            timeout=60,
            what="the woken forwarder rejoining with levels of its own",
        )
        # Everything is in; a copy the zombie still forwarded would show up now.
        records = read_committed(system_topics, topic, len(bodies) + 1, timeout=10)
    finally:
        zombie.resume()
        sender.join(120)
        assert zombie.terminate() == 0, "the woken forwarder stops cleanly"
        assert survivor.terminate() == 0, "the survivor stops cleanly"
    counts = Counter(r.value().decode() for r in records)
    assert set(counts) == set(bodies), "no delayed message lost"
    assert [b for b, c in counts.items() if c > 1] == [], "no delayed message twice"
