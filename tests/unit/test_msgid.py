"""Message ids in the shape of RocketMQ's UNIQ_KEY: 32 hex digits, a fixed prefix, time order,
and never one id twice in a process: not after the time part wraps, nor when the clock steps
back."""

from __future__ import annotations

import os
import re
import threading

import pytest

from adapter.msgid import TIME_SPAN_MS, MessageIdGenerator, new_message_id

pytestmark = pytest.mark.timeout(30)

START_MS = 1_700_000_000_000
COUNTER_VALUES = 1 << 16


class SteppingClock:
    """A wall clock a test sets anywhere, backwards included."""

    def __init__(self, now_ms: int) -> None:
        self.ms = now_ms

    def now_ms(self) -> int:
        return self.ms

    def monotonic(self) -> float:
        return 0.0


def ids(generator: MessageIdGenerator, n: int = COUNTER_VALUES) -> set[str]:
    return {generator.next_id() for _ in range(n)}


def test_an_id_is_thirty_two_upper_case_hex_digits() -> None:
    assert re.fullmatch(r"[0-9A-F]{32}", new_message_id())


def test_ids_of_one_process_share_their_prefix_and_never_repeat() -> None:
    generator = MessageIdGenerator()
    made = [generator.next_id() for _ in range(20_000)]
    assert len(set(made)) == len(made)
    assert len({i[:20] for i in made}) == 1, "IPv4 + pid + salt is fixed per process"


def test_two_generators_do_not_collide() -> None:
    one, two = MessageIdGenerator(), MessageIdGenerator()
    assert one.next_id()[:20] != two.next_id()[:20], "the random salt tells them apart"


def test_ids_sort_by_time_within_a_millisecond_counter_block() -> None:
    generator = MessageIdGenerator()
    first, second = generator.next_id(), generator.next_id()
    assert first[20:28] <= second[20:28], "the time part never goes back"


def test_an_id_made_after_the_time_part_wrapped_is_new() -> None:
    clock = SteppingClock(START_MS)
    generator = MessageIdGenerator(clock)
    before = ids(generator)
    clock.ms += TIME_SPAN_MS  # 49.7 days on: the same time part, the counter round again

    after = ids(generator)

    assert not before & after, f"{len(before & after)} ids repeated after the wrap"
    assert generator.salts == 2
    assert len({i[:20] for i in after}) == 1


def test_ids_made_after_the_clock_stepped_back_are_new() -> None:
    clock = SteppingClock(START_MS)
    generator = MessageIdGenerator(clock)
    before = ids(generator)
    clock.ms += 60_000
    before |= ids(generator, 1)
    clock.ms -= 60_000  # NTP steps the clock back a minute

    after = ids(generator)

    assert not before & after, f"{len(before & after)} ids repeated after the step back"
    assert generator.salts == 2, "one new salt for the step back"


def test_a_clock_that_moves_on_keeps_the_prefix_and_the_time_order() -> None:
    clock = SteppingClock(START_MS)
    generator = MessageIdGenerator(clock)
    made = []
    for _ in range(100):
        made += [generator.next_id(), generator.next_id()]
        clock.ms += 7
    assert generator.salts == 1
    assert len({i[:20] for i in made}) == 1
    assert [i[20:28] for i in made] == sorted(i[20:28] for i in made)


def test_threads_sharing_a_generator_on_a_moving_clock_never_get_the_same_id() -> None:
    clock = SteppingClock(START_MS)
    generator = MessageIdGenerator(clock)
    made: list[list[str]] = [[] for _ in range(4)]

    def make(out: list[str]) -> None:
        for i in range(20_000):
            out.append(generator.next_id())
            if i % 1000 == 0:
                clock.ms += 1

    threads = [threading.Thread(target=make, args=(out,)) for out in made]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    every = [i for out in made for i in out]
    assert len(every) == 80_000
    assert len(set(every)) == len(every)


def test_a_forked_child_makes_ids_with_a_prefix_of_its_own() -> None:
    parent = new_message_id()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report one id and leave at once
        os.write(write, new_message_id().encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 64).decode()
    os.close(read)
    os.waitpid(pid, 0)
    assert re.fullmatch(r"[0-9A-F]{32}", child)
    assert child[:20] != parent[:20], "pid and salt differ in the child"
