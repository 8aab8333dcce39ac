from __future__ import annotations

import pytest

from adapter import naming
from adapter.delay import DelayLevels
from adapter.exceptions import TopicLayoutError
from adapter.kafka.topics import Replication, layout_problems, replication_for, system_layout

pytestmark = pytest.mark.timeout(30)


def test_the_layout_has_co_partitioned_transaction_topics_and_a_partition_per_level_and_hop() -> (
    None
):
    specs = {s.name: s for s in system_layout(6, DelayLevels.parse("1s 2s 3s"))}
    assert {
        specs[n].partitions
        for n in (naming.TRANS_HALF_TOPIC, naming.TRANS_END_TOPIC, naming.TRANS_OP_TOPIC)
    } == {6}
    assert specs[naming.SCHEDULE_TOPIC].partitions == 3 + 5, "3 levels, 5 fine hops"
    assert specs[naming.SCHEDULE_TOPIC].grows_from == 3
    assert specs[naming.SCHEDULE_TOPIC].configs == {"message.timestamp.type": "LogAppendTime"}
    assert specs[naming.TRANS_CHECK_MAX_TIME_TOPIC].partitions == 1


def test_matching_existing_topics_raise_no_problem() -> None:
    wanted = system_layout(8)
    existing = {s.name: s.partitions for s in wanted}
    configs = {naming.SCHEDULE_TOPIC: {"message.timestamp.type": "LogAppendTime"}}
    assert layout_problems(wanted, existing, configs) == []


def test_transaction_topics_that_are_not_co_partitioned_are_refused_with_the_reason() -> None:
    problems = layout_problems(
        system_layout(8),
        {naming.TRANS_HALF_TOPIC: 8, naming.TRANS_END_TOPIC: 4},
        {},
    )
    assert any("co-partitioned" in p for p in problems)


def test_a_schedule_topic_without_one_partition_per_level_and_hop_is_refused() -> None:
    problems = layout_problems(system_layout(8), {naming.SCHEDULE_TOPIC: 10}, {})
    assert problems == [
        "SCHEDULE_TOPIC_XXXX has 10 partitions, expected 23 (one partition per delay level "
        "and per fine hop)"
    ]


def test_a_schedule_topic_of_an_earlier_release_with_the_levels_only_may_grow() -> None:
    assert layout_problems(system_layout(8), {naming.SCHEDULE_TOPIC: 18}, {}) == []


def test_the_recall_topic_is_compacted_and_keeps_its_markers_a_day() -> None:
    specs = {s.name: s for s in system_layout(8)}
    recalls = specs[naming.TIMER_RECALL_TOPIC]
    assert recalls.partitions == 1
    assert recalls.configs["cleanup.policy"] == "compact"
    assert recalls.configs["delete.retention.ms"] == "86400000"


def test_a_schedule_topic_stamped_with_create_time_is_refused() -> None:
    problems = layout_problems(
        system_layout(8),
        {naming.SCHEDULE_TOPIC: 18},
        {naming.SCHEDULE_TOPIC: {"message.timestamp.type": "CreateTime"}},
    )
    assert len(problems) == 1
    assert "LogAppendTime" in problems[0]


def test_zero_half_partitions_is_an_error() -> None:
    with pytest.raises(TopicLayoutError):
        system_layout(0)


@pytest.mark.parametrize(
    ("brokers", "factor", "min_insync"), [(1, 1, 1), (2, 1, 1), (3, 3, 2), (5, 3, 2)]
)
def test_the_default_replication_suits_the_cluster(
    brokers: int, factor: int, min_insync: int
) -> None:
    assert replication_for(brokers) == Replication(factor, min_insync)


def test_a_replication_below_three_on_a_production_cluster_is_refused_unless_asked_for() -> None:
    with pytest.raises(TopicLayoutError, match="refusing replication factor 2 on a cluster of 3"):
        replication_for(3, 2)
    assert replication_for(3, 2, allow_under_replicated=True) == Replication(2, 1)


def test_a_replication_the_cluster_cannot_hold_is_refused_with_the_broker_count() -> None:
    with pytest.raises(TopicLayoutError, match="factor 3 needs 3 brokers; the cluster has 1"):
        replication_for(1, 3)
    with pytest.raises(TopicLayoutError, match="between 1 and the replication factor 3, got 4"):
        replication_for(3, 3, 4)


def test_new_system_topics_carry_their_replication_and_min_isr() -> None:
    layout = system_layout(8, replication=Replication(3, 2))
    schedule = next(s for s in layout if s.name == naming.SCHEDULE_TOPIC).new_topic()
    assert schedule.replication_factor == 3
    assert schedule.config == {
        "message.timestamp.type": "LogAppendTime",
        "min.insync.replicas": "2",
    }
    assert system_layout(8)[0].new_topic().replication_factor == -1  # the broker's default
