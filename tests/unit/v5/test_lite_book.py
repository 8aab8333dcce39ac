"""A ``LitePushConsumer``'s book: which records reach the listener, where each lite topic
stands, where a partition is read from, and what progress is saved."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from adapter.v5.lite_book import LiteBook, Progress

pytestmark = pytest.mark.timeout(30)


def test_a_new_lite_topic_starts_at_its_partition_s_end() -> None:
    book = LiteBook()

    assert book.subscribe("chat-1", partition=2, end=40) == Progress(2, 40)
    assert not book.hand("chat-1", 39), "sent before the subscription"
    assert book.hand("chat-1", 40)


def test_a_lite_topic_the_group_consumed_before_resumes_where_it_stopped() -> None:
    book = LiteBook()
    book.known({"chat-1": Progress(2, 7)})

    assert book.subscribe("chat-1", partition=2, end=40) == Progress(2, 7)
    assert book.start(2) == 7


def test_only_subscribed_lite_topics_reach_the_listener_and_each_record_once() -> None:
    book = LiteBook()
    book.subscribe("mine", 0, end=0)

    assert not book.hand("other", 1)
    assert not book.hand(None, 2), "a record of no lite topic"
    assert book.hand("mine", 3)
    assert not book.hand("mine", 3), "read again after a seek: not handed twice"


def test_consuming_moves_the_progress_and_is_saved_once() -> None:
    book = LiteBook()
    book.subscribe("mine", 1, end=5)
    book.changed()
    book.hand("mine", 5)
    book.consumed("mine", 5)

    assert book.changed() == {"mine": Progress(1, 6)}
    assert book.changed() == {}


def test_a_partition_is_read_from_its_slowest_subscribed_lite_topic() -> None:
    book = LiteBook()
    book.known({"behind": Progress(0, 3)})
    book.subscribe("ahead", 0, end=10)
    book.subscribe("behind", 0, end=10)
    book.subscribe("elsewhere", 1, end=0)

    assert book.start(0) == 3
    assert book.start(2) is None, "no subscribed lite topic there: not read"
    assert book.partitions() == {0, 1}


def test_unsubscribing_keeps_the_progress_for_a_later_subscription() -> None:
    book = LiteBook()
    book.subscribe("mine", 0, end=0)
    book.hand("mine", 0)
    book.consumed("mine", 0)
    book.unsubscribe("mine")

    assert book.start(0) is None
    assert not book.hand("mine", 1)
    assert book.subscribe("mine", 0, end=9) == Progress(0, 1)


def test_a_record_handed_over_before_unsubscribing_is_not_the_next_subscription_s() -> None:
    book = LiteBook()
    book.subscribe("mine", 0, end=0)
    assert book.hand("mine", 0)
    before = book.subscription("mine")
    book.unsubscribe("mine")
    book.subscribe("mine", 0, end=1)

    assert book.subscription("mine") != before, "the waiting record is skipped"
    assert book.start(0) == 0, "and read again"
    assert book.hand("mine", 0)


LITES = ["a", "b", "c", "d"]
PARTITION_OF = {"a": 0, "b": 0, "c": 1, "d": 1}


class LiteConsumerMachine(RuleBasedStateMachine):
    """Sends, subscriptions, reads, consumes and restarts interleaved, the reader moving as
    the consumer's loop does: each subscribed lite topic's messages from its start reach the
    listener once each per run, in order, and no one else's; a restart resumes from what was
    saved, so a crash may deliver again what was consumed since, and never skips any."""

    def __init__(self) -> None:
        super().__init__()
        self.log: dict[int, list[str]] = {0: [], 1: []}
        self.saved: dict[str, Progress] = {}
        self.delivered: dict[str, list[int]] = {lite: [] for lite in LITES}
        self.owed: dict[str, int] = {}  # subscribed lite -> first offset it is owed from
        self.start_over()

    def start_over(self) -> None:
        self.book = LiteBook()
        self.book.known(dict(self.saved))
        self.reading: dict[int, int] = {}
        self.pending: dict[str, list[tuple[int, int | None]]] = {lite: [] for lite in LITES}
        self.since_restart: dict[str, list[int]] = {lite: [] for lite in LITES}

    def sync(self, partition: int) -> None:
        start = self.book.start(partition)
        if start is None:
            self.reading.pop(partition, None)
        elif partition not in self.reading or start < self.reading[partition]:
            self.reading[partition] = start

    @rule(lite=st.sampled_from(LITES))
    def send(self, lite: str) -> None:
        self.log[PARTITION_OF[lite]].append(lite)

    @rule(lite=st.sampled_from(LITES))
    def subscribe(self, lite: str) -> None:
        partition = PARTITION_OF[lite]
        if self.book.subscribed(lite):
            return
        end = self.reading.get(partition, len(self.log[partition]))
        where = self.book.subscribe(lite, partition, end)
        if self.delivered[lite]:
            assert where.next <= max(self.delivered[lite]) + 1, "nothing consumed is skipped"
        self.owed.setdefault(lite, where.next)
        self.saved.update(self.book.changed())  # the consumer saves where it starts at once
        self.sync(partition)

    @rule(lite=st.sampled_from(LITES))
    def unsubscribe(self, lite: str) -> None:
        self.book.unsubscribe(lite)
        self.owed.pop(lite, None)
        self.sync(PARTITION_OF[lite])

    @rule(partition=st.sampled_from([0, 1]))
    def read(self, partition: int) -> None:
        position = self.reading.get(partition)
        if position is None or position >= len(self.log[partition]):
            return
        lite = self.log[partition][position]
        self.reading[partition] = position + 1
        if self.book.hand(lite, position):
            self.pending[lite].append((position, self.book.subscription(lite)))

    @rule(lite=st.sampled_from(LITES))
    def consume(self, lite: str) -> None:
        if not self.pending[lite]:
            return
        offset, subscription = self.pending[lite].pop(0)
        if self.book.subscription(lite) != subscription:
            return  # the consumer skips it: left for a later subscription
        assert lite in self.owed, "only a subscribed lite topic reaches the listener"
        self.delivered[lite].append(offset)
        self.since_restart[lite].append(offset)
        self.book.consumed(lite, offset)

    @rule()
    def save(self) -> None:
        self.saved.update(self.book.changed())

    @rule(crash=st.booleans())
    def restart(self, crash: bool) -> None:
        """A new consumer of the group: after a shutdown (its progress saved) or a crash."""
        if not crash:
            self.saved.update(self.book.changed())
        self.owed = {}
        self.start_over()

    @invariant()
    def each_lite_topic_in_order_once_per_run(self) -> None:
        for lite, offsets in self.since_restart.items():
            assert offsets == sorted(set(offsets)), f"{lite}: {offsets}"
            assert all(self.log[PARTITION_OF[lite]][o] == lite for o in offsets)

    def teardown(self) -> None:
        """Read and consume everything: every lite topic subscribed now got all it is owed."""
        for _ in range(100):
            for partition in (0, 1):
                while self.reading.get(partition, 10**9) < len(self.log[partition]):
                    self.read(partition)
            for lite in LITES:
                while self.pending[lite]:
                    self.consume(lite)
        for lite, first in self.owed.items():
            mine = [o for o, name in enumerate(self.log[PARTITION_OF[lite]]) if name == lite]
            assert [o for o in mine if o >= first] == [
                o for o in self.since_restart[lite] if o >= first
            ]


LiteConsumerMachine.TestCase.settings = settings(
    max_examples=200, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)  # fmt: skip
test_each_subscribed_lite_topic_gets_its_messages_once_in_order_and_no_other = (
    LiteConsumerMachine.TestCase
)
