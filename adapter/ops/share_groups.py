"""The 5.x ``SimpleConsumer``'s groups (Kafka share groups) in ``groups list|lag|reset``.

A ``SimpleConsumer`` group ``G`` is the Kafka share group ``G`` (:mod:`adapter.v5.share_group`).
Its progress on each partition is the share-partition start offset (SPSO): every message before
it is acknowledged (or archived); the lag is the end offset minus the SPSO, as Kafka reports it
(``DescribeShareGroupOffsets`` v1, KIP-1226, which also leaves out records acknowledged past the
SPSO; on an older broker, the difference itself). A partition the group has not fetched yet has
no SPSO and counts from the earliest retained message (the adapter sets
``share.auto.offset.reset=earliest``). A reset writes new SPSOs with ``AlterShareGroupOffsets``,
which Kafka takes only while the group has no members; a reset is refused here first, naming
them. confluent-kafka 2.16 has none of these calls, so they go over Kafka's protocol
(:mod:`adapter.ops.share_protocol` says why not Kafka's Java ``Admin``): one short connection
per broker asked, each call within ``timeout_s``.

Known gaps: the connections are plaintext: with ``security.protocol`` other than PLAINTEXT
(``RMQ_ADAPTER_KAFKA_SECURITY_PROTOCOL``), share groups are not read and the commands say so.
"""

from __future__ import annotations

import itertools
import logging
import socket
import struct
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from confluent_kafka import TopicPartition

from adapter import naming
from adapter.exceptions import AdapterError, KafkaUnavailableError
from adapter.ops import protocol_codec as codec
from adapter.ops import share_protocol as wire
from adapter.ops.groups import (
    EARLIEST,
    LATEST,
    GroupError,
    GroupLag,
    GroupRow,
    Groups,
    Lag,
    Member,
    dead_letter_topic,
    refuse_while_live,
)
from adapter.ops.offset_reset import Move, Queue, Target

log = logging.getLogger(__name__)

T = TypeVar("T")
A = TypeVar("A")
KIND = "simple (share group)"
_RETRY_S = 0.2


def position(start: wire.StartOffset | None, end: int) -> int | None:
    """Where a reset's plan moves a share group from on a partition: the end less Kafka's lag
    (records acknowledged past the SPSO count as consumed; Kafka persists the SPSO lazily, so
    a group that acknowledged everything may still report an old one), else the SPSO;
    ``None``: the group has not fetched from it (it starts at the earliest retained)."""
    if start is None or start.start_offset < 0:
        return None
    if start.lag >= 0:
        return max(end - start.lag, start.start_offset)
    return start.start_offset


class ShareGroupsUnavailable(AdapterError):
    """Share groups cannot be read here (a secured listener, or a Kafka without them)."""


class _Connection:
    """One broker connection: requests in turn, each answer within the deadline."""

    def __init__(self, host: str, port: int, timeout_s: float) -> None:
        self._ids = itertools.count(1)
        try:
            self._socket = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise KafkaUnavailableError(f"cannot reach the broker {host}:{port}: {exc}") from exc
        self.address = f"{host}:{port}"
        try:
            self.versions = self._versions()
        except BaseException:
            self._socket.close()
            raise

    def _versions(self) -> dict[int, tuple[int, int]]:
        answer = self._call(wire.API_VERSIONS, 3, wire.api_versions_request())
        try:
            error, versions = wire.api_versions_response(answer)
        except codec.ProtocolError as exc:
            raise ShareGroupsUnavailable(f"{self.address} answered ApiVersions unreadably") from exc
        if error:
            raise ShareGroupsUnavailable(
                f"{self.address} refused ApiVersions: {wire.error_name(error)}"
            )
        return versions

    def close(self) -> None:
        self._socket.close()

    def __enter__(self) -> _Connection:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def version(self, api_key: int, what: str) -> int:
        found = wire.version(api_key, self.versions)
        if found is None:
            raise ShareGroupsUnavailable(
                f"the broker at {self.address} does not speak {what} (share groups need Kafka 4.1+)"
            )
        return found

    def _read(self, n: int) -> bytes:
        parts, left = [], n
        while left:
            chunk = self._socket.recv(left)
            if not chunk:
                raise KafkaUnavailableError(f"{self.address} closed the connection")
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)

    def _call(self, api_key: int, version: int, body: bytes) -> codec.Reader:
        correlation = next(self._ids)
        frame = codec.request(api_key, version, correlation, "rmq-adapter-groups", body)
        try:
            self._socket.sendall(frame)
            (size,) = struct.unpack(">i", self._read(4))
            answered, reader = codec.response(
                self._read(size), header_tags=api_key != wire.API_VERSIONS
            )
        except (TimeoutError, OSError) as exc:
            raise KafkaUnavailableError(f"{self.address} did not answer: {exc}") from exc
        if answered != correlation:
            raise KafkaUnavailableError(
                f"{self.address} answered request {answered}, not {correlation}"
            )
        return reader

    def call(
        self,
        api_key: int,
        what: str,
        body: bytes,
        decode: Callable[[int, codec.Reader], T],
    ) -> T:
        """``what``'s answer, asked in the highest version both sides speak."""
        version = self.version(api_key, what)
        reader = self._call(api_key, version, body)
        try:
            return decode(version, reader)
        except codec.ProtocolError as exc:
            raise GroupError(f"{self.address} answered {what} unreadably: {exc}") from exc


def require_plaintext(conf: Mapping[str, Any]) -> None:
    """Raises :class:`ShareGroupsUnavailable` unless the listener is plaintext (the only kind
    this module's connections speak)."""
    protocol = str(conf.get("security.protocol", "plaintext")).lower()
    if protocol != "plaintext":
        raise ShareGroupsUnavailable(
            "share groups (the 5.x SimpleConsumer's) are read over plaintext listeners only, "
            f"not {protocol.upper()}"
        )


class ShareGroups:
    """Share groups through :class:`~adapter.ops.groups.Groups`' brokers and offsets."""

    def __init__(self, groups: Groups, conf: Mapping[str, Any], timeout_s: float) -> None:
        self._groups = groups
        self._conf = conf
        self._timeout_s = timeout_s

    def _connect(self, host: str, port: int) -> _Connection:
        require_plaintext(self._conf)
        return _Connection(host, port, self._timeout_s)

    def readable(self) -> None:
        """Raises :class:`ShareGroupsUnavailable` when share groups cannot be read here: a
        secured listener, or a broker that does not speak their requests."""
        with self._any() as broker:
            broker.version(wire.LIST_GROUPS, "ListGroups v5")
            broker.version(wire.SHARE_GROUP_DESCRIBE, "ShareGroupDescribe")
            broker.version(wire.DESCRIBE_SHARE_GROUP_OFFSETS, "DescribeShareGroupOffsets")

    def _any(self) -> _Connection:
        brokers = self._groups.brokers()
        host, port = brokers[min(brokers)]
        return self._connect(host, port)

    def _coordinated(
        self,
        group_ids: Sequence[str],
        api_key: int,
        what: str,
        body: Callable[[list[str]], bytes],
        decode: Callable[[int, codec.Reader], list[A]],
        error_of: Callable[[A], tuple[str, int]],
    ) -> dict[str, A]:
        """Ask each coordinator once for all of ``group_ids`` it coordinates, and again for
        those whose coordinator moved or was loading (within the timeout). ``error_of`` names
        an answer's group and error code."""
        deadline = time.monotonic() + self._timeout_s
        pending, answers = sorted(set(group_ids)), {}
        while pending:
            with self._any() as first:
                found = first.call(
                    wire.FIND_COORDINATOR,
                    "FindCoordinator",
                    wire.find_coordinator_request(pending),
                    lambda _, r: wire.find_coordinator_response(r),
                )
            retry: dict[str, int] = {}
            at: dict[tuple[str, int], list[str]] = {}
            for place in found:
                if place.error:
                    retry[place.key] = place.error
                else:
                    at.setdefault((place.host, place.port), []).append(place.key)
            for (host, port), ids in at.items():
                with self._connect(host, port) as coordinator:
                    for answer in coordinator.call(api_key, what, body(ids), decode):
                        group_id, error = error_of(answer)
                        if error in wire.RETRIABLE:
                            retry[group_id] = error
                        else:
                            answers[group_id] = answer
            refused = {g: e for g, e in retry.items() if e not in wire.RETRIABLE}
            if refused or (retry and time.monotonic() > deadline):
                group_id, error = next(iter(refused.items() or retry.items()))
                raise GroupError(f"{what} of share group {group_id!r}: {wire.error_name(error)}")
            pending = sorted(retry)
            if pending:
                time.sleep(_RETRY_S)
        return answers

    def listed(self) -> list[wire.ListedGroup]:
        """Every share group, from every broker (each lists the groups it coordinates)."""
        found: dict[str, wire.ListedGroup] = {}
        for host, port in self._groups.brokers().values():
            with self._connect(host, port) as broker:
                error, groups = broker.call(
                    wire.LIST_GROUPS,
                    "ListGroups v5",
                    wire.list_share_groups_request(),
                    lambda _, r: wire.list_groups_response(r),
                )
            if error:
                raise GroupError(f"ListGroups at {host}:{port}: {wire.error_name(error)}")
            found.update((g.group_id, g) for g in groups)
        return [found[key] for key in sorted(found)]

    def described(self, group_ids: Sequence[str]) -> dict[str, wire.DescribedShareGroup]:
        """The groups and their members; a name no share group has is left out."""
        about = self._coordinated(
            group_ids,
            wire.SHARE_GROUP_DESCRIBE,
            "ShareGroupDescribe",
            wire.share_group_describe_request,
            lambda _, r: wire.share_group_describe_response(r),
            lambda a: (a.group_id, a.error),
        )
        for group_id, one in about.items():
            if one.error and one.error != wire.GROUP_ID_NOT_FOUND:
                detail = one.message or wire.error_name(one.error)
                raise GroupError(f"share group {group_id!r}: {detail}")
        return {g: one for g, one in about.items() if not one.error}

    def start_offsets(self, group_ids: Sequence[str]) -> dict[str, list[wire.StartOffset]]:
        """Each group's start offsets (and Kafka's lag) per partition; a group Kafka refused
        to answer for (gone meanwhile, not ours to see) is left out, logged."""
        answers = self._coordinated(
            group_ids,
            wire.DESCRIBE_SHARE_GROUP_OFFSETS,
            "DescribeShareGroupOffsets",
            wire.describe_offsets_request,
            lambda version, r: wire.describe_offsets_response(r, version),
            lambda a: (a.group_id, a.error),
        )
        found = {}
        for group_id, answer in answers.items():
            if answer.error:
                detail = answer.message or wire.error_name(answer.error)
                log.info("share group %s: no start offsets: %s", group_id, detail)
                continue
            found[group_id] = [o for o in answer.offsets if o.error == 0]
        return found

    def rows(self) -> list[GroupRow]:
        about = self.described([listed.group_id for listed in self.listed()])
        return [
            GroupRow(group_id, None, one.state.lower(), len(one.members), False, True)
            for group_id, one in sorted(about.items())
        ]

    def _known(self, group_id: str) -> tuple[wire.DescribedShareGroup, list[wire.StartOffset]]:
        about = self.described([group_id]).get(group_id)
        if about is None:
            raise GroupError(f"no consumer group or share group {group_id!r}")
        starts = self.start_offsets([group_id])
        if group_id not in starts:
            raise GroupError(f"Kafka did not give share group {group_id!r}'s start offsets")
        return about, starts[group_id]

    def _queues(
        self, topics: Sequence[str], starts: Sequence[wire.StartOffset]
    ) -> list[tuple[TopicPartition, int, int, wire.StartOffset | None]]:
        partitions = self._groups.partitions(sorted(set(topics)))
        earliest = self._groups.offsets(partitions, EARLIEST)
        ends = self._groups.offsets(partitions, LATEST)
        by_key = {(s.topic, s.partition): s for s in starts}
        return [
            (tp, earliest[key], ends[key], by_key.get(key))
            for tp in partitions
            for key in [(tp.topic, tp.partition)]
        ]

    def lag(self, group_id: str) -> GroupLag:
        about, starts = self._known(group_id)
        members = [
            Member(
                m.client_id,
                m.client_host.lstrip("/"),
                tuple(f"{naming.decode(t)}[{p}]" for t, p in m.assignment),
            )
            for m in about.members
        ]
        topics = {t for m in about.members for t, _ in m.assignment} | {s.topic for s in starts}
        queues = []
        for tp, earliest, end, start in self._queues(sorted(topics), starts):
            spso = start.start_offset if start is not None and start.start_offset >= 0 else None
            reported = start.lag if start is not None and start.lag >= 0 else None
            queues.append(Lag(naming.decode(tp.topic), tp.partition, earliest, end, spso, reported))
        dlq = dead_letter_topic(group_id)
        dead = self._groups.dead_letters(dlq) if dlq else None
        return GroupLag(group_id, about.state.lower(), members, queues, dead, share=True)

    def queues(self, group_id: str, topic: str | None, target: Target) -> list[Queue]:
        about, starts = self._known(group_id)
        refuse_while_live(
            f"share group {group_id!r}",
            [f"{m.client_id}@{m.client_host.lstrip('/')}" for m in about.members],
            "stop its SimpleConsumers first; Kafka alters a share group's start offsets only "
            "while it is empty",
        )
        by_key = {(s.topic, s.partition): s for s in starts}
        return self._groups.reset_queues(
            f"share group {group_id!r}",
            sorted({s.topic for s in starts}) if topic is None else [naming.kafka_topic(topic)],
            target,
            lambda key, end: position(by_key.get(key), end),
            missing="no start offsets" if topic is None else f"topic {topic!r} does not exist",
        )

    def execute(self, group_id: str, moves: Sequence[Move]) -> None:
        offsets = [(naming.kafka_topic(m.topic), m.partition, m.to) for m in moves]
        answers = self._coordinated(
            [group_id],
            wire.ALTER_SHARE_GROUP_OFFSETS,
            "AlterShareGroupOffsets",
            lambda ids: wire.alter_offsets_request(ids[0], offsets),
            lambda _, r: [wire.alter_offsets_response(r)],
            lambda a: (group_id, a[0]),
        )
        error, message, parts = answers[group_id]
        if error:
            raise GroupError(
                f"Kafka refused the reset of share group {group_id!r}: "
                f"{message or wire.error_name(error)}"
            )
        for topic, partition, code, text in parts:
            if code:
                raise GroupError(
                    f"Kafka refused the reset of share group {group_id!r} on "
                    f"{naming.decode(topic)}[{partition}]: {text or wire.error_name(code)}"
                )
