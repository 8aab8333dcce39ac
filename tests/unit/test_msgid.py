"""Message ids in the shape of RocketMQ's UNIQ_KEY: 32 hex digits, a fixed prefix, time order."""

from __future__ import annotations

import re

import pytest

from adapter.msgid import MessageIdGenerator, new_message_id

pytestmark = pytest.mark.timeout(30)


def test_an_id_is_thirty_two_upper_case_hex_digits() -> None:
    assert re.fullmatch(r"[0-9A-F]{32}", new_message_id())


def test_ids_of_one_process_share_their_prefix_and_never_repeat() -> None:
    generator = MessageIdGenerator()
    ids = [generator.next_id() for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    assert len({i[:20] for i in ids}) == 1, "IPv4 + pid + salt is fixed per process"


def test_two_generators_do_not_collide() -> None:
    one, two = MessageIdGenerator(), MessageIdGenerator()
    assert one.next_id()[:20] != two.next_id()[:20], "the random salt tells them apart"


def test_ids_sort_by_time_within_a_millisecond_counter_block() -> None:
    generator = MessageIdGenerator()
    first, second = generator.next_id(), generator.next_id()
    assert first[20:28] <= second[20:28], "the time part never goes back"
