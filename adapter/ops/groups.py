"""Consumer groups in RocketMQ's terms: which exist, their lag per queue, and an offset reset.

Plays the part of rocketmq-dashboard's consumer pages and ``mqadmin consumerProgress`` /
``resetOffsetByTime`` on Kafka's consumer groups. A RocketMQ group ``G`` is the Kafka group
``G`` (the 2.0 and 5.x push consumers); a broadcasting instance keeps its own offsets under
``G@<instance>`` (:func:`adapter.naming.broadcast_group_id`); the group's retry topic
``%RETRY%G`` is one of the topics it consumes, and ``%DLQ%G`` holds its dead letters (no one
consumes them: their count is shown). Topic names are shown decoded (``%RETRY%G``, not Kafka's
``.25RETRY.25G``).

Lag is the end offset minus the committed one, per queue, as RocketMQ's "diff" (broker offset
minus consumer offset). A reset goes through Kafka's ``AlterConsumerGroupOffsets``, which Kafka
refuses while the group has members: a reset is refused here first, naming the members, since a
live consumer would overwrite it with its next commit anyway.

The 5.x ``SimpleConsumer``'s groups are Kafka share groups, which confluent-kafka 2.16 can
neither list nor describe (it takes one for a dead classic group): :mod:`adapter.ops.share_groups`
reads and resets them over Kafka's protocol, with this module's offsets and shapes.

Known gaps: lag counts the markers of Kafka transactions (one offset each); ``rmq-adapter
status`` counts a retry backlog exactly by reading it. Share groups are read over plaintext
listeners only (:mod:`adapter.ops.share_groups`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from adapter import naming
from adapter.exceptions import AdapterError
from adapter.kafka import clients
from adapter.ops.offset_reset import Move, Queue, Target, TargetKind

log = logging.getLogger(__name__)

_SYSTEM_GROUP_PREFIXES = ("CID_RMQ_SYS_", "rmq-adapter-", naming.encode(naming.CHECK_PREFIX))
"""The workers' groups, the read-backs' and the producers' check listeners'."""
EARLIEST: OffsetSpec = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
LATEST: OffsetSpec = OffsetSpec.latest()  # type: ignore[no-untyped-call]


class GroupError(AdapterError):
    """A group that does not exist, or one that cannot be reset now."""


class NoGroupError(GroupError):
    """No consumer group of that name (it may be a share group)."""


@dataclass(frozen=True, slots=True)
class GroupRow:
    group: str
    """The RocketMQ group (without a broadcasting instance's suffix)."""
    instance: str | None
    """A broadcasting instance's name (its offsets are its own), else ``None``."""
    state: str
    members: int
    system: bool
    share: bool = False
    """A share group: a 5.x ``SimpleConsumer``'s (:mod:`adapter.ops.share_groups`)."""


@dataclass(frozen=True, slots=True)
class Member:
    client_id: str
    host: str
    queues: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Lag:
    topic: str
    """RocketMQ's name of the topic (``%RETRY%G`` for the retry topic)."""
    partition: int
    earliest: int
    end: int
    committed: int | None
    """``None``: no commit; the group starts from the earliest retained message. A share
    group's share-partition start offset (SPSO)."""
    reported: int | None = None
    """A share group's lag as Kafka reports it (``None``: the difference of offsets)."""

    @property
    def lag(self) -> int:
        if self.reported is not None:
            return self.reported
        return self.end - (self.earliest if self.committed is None else self.committed)


@dataclass(frozen=True, slots=True)
class GroupLag:
    group: str
    state: str
    members: list[Member]
    queues: list[Lag]
    dead_letters: int | None
    """Messages in ``%DLQ%<group>`` (``None``: the group has no dead-letter topic)."""
    share: bool = False


def dead_letter_topic(group: str) -> str | None:
    """The Kafka name of ``%DLQ%<group>``; ``None`` for a Kafka group whose name is not a
    RocketMQ group's (``orders.v2``, a foreign consumer's): it has no dead-letter topic."""
    try:
        return naming.kafka_topic(naming.dlq_topic(group))
    except AdapterError:
        return None


def refuse_while_live(group: str, members: Sequence[str], why: str) -> None:
    """A reset of a group with members is refused, naming them and saying why."""
    if members:
        who = ", ".join(members)
        raise GroupError(f"{group} has {len(members)} live member(s) ({who}): {why}")


def _row(group_id: str, state: str, members: int) -> GroupRow:
    group, _, instance = group_id.partition("@")
    system = group_id.startswith(_SYSTEM_GROUP_PREFIXES)
    return GroupRow(group, instance or None, state, members, system)


def _state(state: Any) -> str:
    return state.name.lower() if isinstance(state, ConsumerGroupState) else str(state).lower()


class Groups:
    """The shell over Kafka's admin API; every call waits at most ``timeout_s``."""

    def __init__(self, conf: Mapping[str, Any], timeout_s: float) -> None:
        self._timeout_s = timeout_s
        self._admin: AdminClient = clients.admin(dict(conf))
        metadata = clients.reach(conf, timeout_s)
        self._brokers = {b.id: (str(b.host), b.port) for b in metadata.brokers.values()}

    def brokers(self) -> dict[int, tuple[str, int]]:
        """Each broker's id and address, as the cluster's metadata named them on connecting."""
        return dict(self._brokers)

    def rows(self) -> list[GroupRow]:
        listed = self._admin.list_consumer_groups(request_timeout=self._timeout_s)
        found = listed.result(timeout=self._timeout_s)
        ids = sorted(g.group_id for g in found.valid)
        if not ids:
            return []
        described = self._admin.describe_consumer_groups(ids, request_timeout=self._timeout_s)
        rows = []
        for group_id in ids:
            try:
                about = described[group_id].result(timeout=self._timeout_s)
            except KafkaException as exc:  # gone meanwhile, or not ours to see
                log.info("group %s not described: %s", group_id, exc.args[0].str())
                continue
            rows.append(_row(group_id, _state(about.state), len(about.members)))
        return rows

    def _describe(self, group_id: str) -> Any:
        about = self._admin.describe_consumer_groups([group_id], request_timeout=self._timeout_s)
        return about[group_id].result(timeout=self._timeout_s)

    def committed(self, group_id: str) -> dict[tuple[str, int], int]:
        request = [ConsumerGroupTopicPartitions(group_id)]
        answer = self._admin.list_consumer_group_offsets(request, request_timeout=self._timeout_s)
        result = answer[group_id].result(timeout=self._timeout_s)
        return {
            (tp.topic, tp.partition): tp.offset
            for tp in result.topic_partitions or []
            if tp.error is None and tp.offset >= 0
        }

    def offsets(
        self, partitions: Sequence[TopicPartition], spec: OffsetSpec
    ) -> dict[tuple[str, int], int]:
        if not partitions:
            return {}
        asked = {tp: spec for tp in partitions}
        answer = self._admin.list_offsets(asked, request_timeout=self._timeout_s)
        return {
            (tp.topic, tp.partition): future.result(timeout=self._timeout_s).offset
            for tp, future in answer.items()
        }

    def partitions(self, kafka_topics: Sequence[str]) -> list[TopicPartition]:
        metadata = self._admin.list_topics(timeout=self._timeout_s).topics
        return [
            TopicPartition(topic, partition)
            for topic in kafka_topics
            if topic in metadata and metadata[topic].error is None
            for partition in sorted(metadata[topic].partitions)
        ]

    def _known(self, group_id: str) -> tuple[Any, dict[tuple[str, int], int]]:
        about = self._describe(group_id)
        committed = self.committed(group_id)
        if about.state == ConsumerGroupState.DEAD and not committed:
            raise NoGroupError(f"no consumer group {group_id!r} (no members, no committed offsets)")
        return about, committed

    def lag(self, group_id: str) -> GroupLag:
        about, committed = self._known(group_id)
        members = [
            Member(
                m.client_id,
                m.host.lstrip("/"),
                tuple(
                    f"{naming.decode(tp.topic)}[{tp.partition}]"
                    for tp in m.assignment.topic_partitions
                ),
            )
            for m in about.members
        ]
        assigned = {tp.topic for m in about.members for tp in m.assignment.topic_partitions}
        topics = sorted(assigned | {topic for topic, _ in committed})
        partitions = self.partitions(topics)
        earliest = self.offsets(partitions, EARLIEST)
        ends = self.offsets(partitions, LATEST)
        queues = [
            Lag(naming.decode(tp.topic), tp.partition, earliest[key], ends[key], committed.get(key))
            for tp in partitions
            for key in [(tp.topic, tp.partition)]
        ]
        topic = dead_letter_topic(group_id.partition("@")[0])
        dead = self.dead_letters(topic) if topic else None
        return GroupLag(group_id, _state(about.state), members, queues, dead)

    def dead_letters(self, kafka_topic: str) -> int | None:
        """The messages a dead-letter topic holds; ``None`` when it does not exist."""
        dlq = self.partitions([kafka_topic])
        if not dlq:
            return None
        ends = self.offsets(dlq, LATEST)
        starts = self.offsets(dlq, EARLIEST)
        return sum(ends[key] - starts[key] for key in ends)

    def queues(self, group_id: str, topic: str | None, target: Target) -> list[Queue]:
        """The queues a reset of ``group_id`` moves: one topic's, or every one it committed."""
        about, committed = self._known(group_id)
        refuse_while_live(
            f"group {group_id!r}",
            [f"{m.client_id}@{m.host.lstrip('/')}" for m in about.members],
            "stop its consumers first; Kafka refuses a reset while they run, and they would "
            "commit over it",
        )
        return self.reset_queues(
            f"group {group_id!r}",
            sorted({t for t, _ in committed}) if topic is None else [naming.kafka_topic(topic)],
            target,
            lambda key, _end: committed.get(key),
            missing="no committed offsets" if topic is None else f"topic {topic!r} does not exist",
        )

    def reset_queues(
        self,
        who: str,
        kafka_topics: Sequence[str],
        target: Target,
        progress: Callable[[tuple[str, int], int], int | None],
        *,
        missing: str,
    ) -> list[Queue]:
        """The queues of ``kafka_topics`` a reset of ``who`` moves: each with its earliest and
        end offsets, the group's ``progress`` (given the queue and its end) and, for a reset to
        a time, the offset of that time; ``missing`` says why there are none."""
        partitions = self.partitions(kafka_topics)
        if not partitions:
            raise GroupError(f"nothing to reset for {who}: {missing}")
        earliest = self.offsets(partitions, EARLIEST)
        ends = self.offsets(partitions, LATEST)
        at_time: dict[tuple[str, int], int] = {}
        if target.kind is TargetKind.TIME:
            at_time = self.offsets(partitions, OffsetSpec.for_timestamp(target.value))
        return [
            Queue(
                naming.decode(tp.topic),
                tp.partition,
                earliest[key],
                ends[key],
                progress(key, ends[key]),
                at_time.get(key) if at_time.get(key, -1) >= 0 else None,
            )
            for tp in partitions
            for key in [(tp.topic, tp.partition)]
        ]

    def execute(self, group_id: str, moves: Sequence[Move]) -> None:
        """Commit the plan's targets for ``group_id``; Kafka refuses it if a member joined."""
        offsets = [TopicPartition(naming.kafka_topic(m.topic), m.partition, m.to) for m in moves]
        request = [ConsumerGroupTopicPartitions(group_id, offsets)]
        answer = self._admin.alter_consumer_group_offsets(request, request_timeout=self._timeout_s)
        try:
            result = answer[group_id].result(timeout=self._timeout_s)
        except KafkaException as exc:
            raise GroupError(
                f"Kafka refused the reset of {group_id!r}: {exc.args[0].str()}"
            ) from exc
        refused = [tp for tp in result.topic_partitions or [] if tp.error is not None]
        if refused:
            first = refused[0]
            raise GroupError(
                f"Kafka refused the reset of {group_id!r} on {naming.decode(first.topic)}"
                f"[{first.partition}]: {first.error.str()}"
            )
