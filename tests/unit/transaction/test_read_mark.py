"""The check gate of one END partition: when a read mark is asked for, again, and given up on."""

from __future__ import annotations

from adapter.transaction.read_mark import ReadMark


def test_a_mark_is_asked_for_once_a_check_is_due_and_none_was_read_past_it() -> None:
    mark = ReadMark(reask_ms=5_000)
    assert not mark.wanted(None, now_ms=1_000), "nothing due"
    assert not mark.wanted(2_000, now_ms=1_000), "due later"
    assert mark.wanted(1_000, now_ms=1_000)
    assert not mark.wanted(1_000, now_ms=1_001), "one is on its way"
    mark.read(1_000)
    assert not mark.wanted(1_000, now_ms=1_002), "END was read past the due time"
    assert mark.waiting_ms(1_002) == 0


def test_a_mark_that_does_not_come_back_is_asked_for_again_and_counted() -> None:
    mark = ReadMark(reask_ms=5_000)
    assert mark.wanted(0, now_ms=0)
    assert mark.next_ask_ms() == 5_000
    assert not mark.wanted(0, now_ms=4_999)
    assert mark.wanted(0, now_ms=5_000)
    assert mark.wanted(0, now_ms=10_000)
    assert mark.reasks == 2
    assert mark.waiting_ms(12_000) == 12_000, "counted from the first unanswered mark"


def test_an_older_mark_read_back_does_not_answer_the_one_awaited() -> None:
    mark = ReadMark(reask_ms=5_000)
    mark.wanted(0, now_ms=0)
    mark.wanted(0, now_ms=5_000)
    mark.read(0)
    assert mark.waiting_ms(6_000) == 6_000
    assert mark.blocks(5_000) is True
    mark.read(5_000)
    assert mark.waiting_ms(6_000) == 0
    assert not mark.blocks(5_000)
