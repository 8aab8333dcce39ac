"""Head-of-line order per level: nothing before it is due, order kept, blocked levels wait."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from adapter.schedule.head_of_line import Entry, HeadOfLine

entries = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 10_000)), min_size=1, max_size=60)


def queue_of(items: list[tuple[int, int]]) -> HeadOfLine[str]:
    heads: HeadOfLine[str] = HeadOfLine()
    offsets = {p: 0 for p in range(4)}
    dues = {p: 0 for p in range(4)}
    for partition, step in items:
        dues[partition] += step  # one level: due times never go down
        heads.push(Entry(partition, offsets[partition], dues[partition], f"{partition}"))
        offsets[partition] += 1
    return heads


@given(entries, st.integers(0, 200_000), st.integers(1, 100))
def test_nothing_is_taken_before_it_is_due_and_each_level_keeps_its_order(
    items: list[tuple[int, int]], now: int, limit: int
) -> None:
    heads = queue_of(items)
    taken = heads.take_due(now, limit)
    assert len(taken) <= limit
    assert all(e.due_ms <= now for e in taken)
    for partition in range(4):
        offsets = [e.offset for e in taken if e.partition == partition]
        assert offsets == list(range(len(offsets))), "a level is taken from its head, in order"
        head = heads.head(partition)
        if head is not None and len(taken) < limit:
            assert head.due_ms > now, "a due head is not left behind while there is room"


@given(entries, st.integers(0, 200_000))
def test_entries_put_back_are_taken_again_in_the_same_order(
    items: list[tuple[int, int]], now: int
) -> None:
    heads = queue_of(items)
    first = heads.take_due(now, 1000)
    heads.put_back(first)
    again = heads.take_due(now, 1000)
    assert sorted(again, key=lambda e: (e.partition, e.offset)) == sorted(
        first, key=lambda e: (e.partition, e.offset)
    )


def test_a_blocked_level_waits_while_the_others_go_on() -> None:
    heads: HeadOfLine[str] = HeadOfLine()
    heads.push(Entry(0, 0, 100, "a"))
    heads.push(Entry(1, 0, 100, "b"))
    heads.block(0, until_ms=5_000)
    assert [e.item for e in heads.take_due(1_000, 10)] == ["b"]
    assert heads.next_wakeup_ms() == 5_000
    assert [e.item for e in heads.take_due(5_000, 10)] == ["a"]


def test_the_wakeup_is_the_earliest_head() -> None:
    heads: HeadOfLine[str] = HeadOfLine()
    assert heads.next_wakeup_ms() is None
    heads.push(Entry(0, 0, 3_000, "a"))
    heads.push(Entry(1, 0, 2_000, "b"))
    heads.push(Entry(1, 1, 9_000, "c"))
    assert heads.next_wakeup_ms() == 2_000
    heads.drop(1)
    assert heads.next_wakeup_ms() == 3_000


def test_a_waiting_level_is_paused_only_once_it_holds_enough() -> None:
    heads: HeadOfLine[str] = HeadOfLine()
    heads.push(Entry(0, 0, 5_000, "a", size=600))
    assert not heads.should_pause(0, now_ms=1_000, high_bytes=1_000), "the next records come on"
    heads.push(Entry(0, 1, 5_000, "b", size=600))
    assert heads.held_bytes(0) == 1_200
    assert heads.should_pause(0, now_ms=1_000, high_bytes=1_000)
    assert not heads.may_resume(0, now_ms=1_000, high_bytes=1_000)


def test_a_paused_level_fetches_again_once_its_head_is_due_or_it_holds_little() -> None:
    heads: HeadOfLine[str] = HeadOfLine()
    heads.push(Entry(0, 0, 5_000, "a", size=600))
    heads.push(Entry(0, 1, 9_000, "b", size=600))
    assert heads.may_resume(0, now_ms=5_000, high_bytes=1_000), "its head is due"
    assert [e.item for e in heads.take_due(5_000, 10)] == ["a"]
    assert heads.held_bytes(0) == 600
    assert not heads.may_resume(0, now_ms=5_000, high_bytes=1_000), "600 is not under half"
    assert heads.may_resume(0, now_ms=5_000, high_bytes=1_300), "600 is under half of 1,300"


def test_bytes_held_follow_entries_taken_put_back_and_dropped() -> None:
    heads: HeadOfLine[str] = HeadOfLine()
    heads.push(Entry(0, 0, 100, "a", size=10))
    heads.push(Entry(0, 1, 100, "b", size=20))
    taken = heads.take_due(100, 10)
    assert heads.held_bytes(0) == 0
    heads.put_back(taken)
    assert heads.held_bytes(0) == 30
    heads.drop(0)
    assert heads.held_bytes(0) == 0


def test_a_record_pushed_and_forwarded_is_known_as_read_until_its_level_is_dropped() -> None:
    heads: HeadOfLine[str] = HeadOfLine()
    heads.push(Entry(0, 7, 100, "a"))
    heads.push(Entry(0, 9, 100, "b"))
    assert heads.take_due(100, 10)  # forwarded: gone from the queue, still read
    assert [heads.read_already(0, o) for o in (7, 8, 9, 10)] == [True, True, True, False]
    assert not heads.read_already(1, 0), "another level has read nothing"
    heads.drop(0)
    assert not heads.read_already(0, 7), "the next owner reads the level again"
