"""Which share consumer of the pool a ``receive`` polls: the free one polled longest ago. No
Kafka: members are stand-ins with the two attributes the choice reads."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from adapter.v5.share_members import next_to_poll

pytestmark = pytest.mark.timeout(30)


@dataclass
class Polled:
    index: int
    last_polled: float


def test_every_member_is_polled_in_turn_not_the_first_free_one_again_and_again() -> None:
    """A share group assigns each partition to some of its members only (after a coordinator
    moved, seen on three brokers: one partition went to members the pool never polled, and
    its records waited there until a new consumer joined), so every member must be polled."""
    members = [Polled(0, 30.0), Polled(1, 10.0), Polled(2, 20.0)]

    assert next_to_poll(members, lambda m: True) is members[1]
    assert next_to_poll(members, lambda m: m.index != 1) is members[2]
    assert next_to_poll(members, lambda m: False) is None
