"""What the forwarder does with the records that fell due: one batch, one transaction (pure).

Reproduces ``ScheduleMessageService.DeliverDelayedMessageTimerTask.executeOnTimeup``: a due
record of a level is restored to its real topic and queue. For a timer message (RocketMQ 5's
``delivery_timestamp``) the record is a hop (see :mod:`adapter.schedule.timer`): it is delivered
once its deliver time has come, with a DELIVERED marker in ``RMQ_SYS_TIMER_RECALL``; before
that it hops on, or waits at the head for the last few milliseconds; a recalled timer is dropped
with a DROPPED marker. Beyond RocketMQ, a record that can never be delivered is parked in the
poison topic with the reason, and a record whose real topic is missing is set aside and
retried (:mod:`adapter.schedule.aside`) while its level goes on.

Known gaps: none known.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from adapter import naming
from adapter import properties as prop
from adapter.exceptions import AdapterError
from adapter.hops import HopTable
from adapter.kafka.worker import parked_headers
from adapter.message import Delivery
from adapter.schedule import recall, timer
from adapter.schedule.aside import set_aside
from adapter.schedule.destinations import refused_destination
from adapter.schedule.envelope import delivered
from adapter.schedule.grants import ScheduleGrants
from adapter.schedule.held import Held as Held
from adapter.schedule.held import Parked as Parked
from adapter.schedule.held import Send as Send
from adapter.schedule.held import SendKind
from adapter.wire import codec
from adapter.wire.records import ScheduledMessage

SCHEDULE = naming.kafka_topic(naming.SCHEDULE_TOPIC)
POISON = naming.kafka_topic(naming.POISON_TOPIC)
RECALLS = naming.kafka_topic(naming.TIMER_RECALL_TOPIC)


class RefusedDestination(AdapterError):
    """A record addressed where no application may deliver through the forwarder."""

    kind = "refused destination"


@dataclass(slots=True)
class Batch:
    """One transaction's work: what to produce, the positions it consumes, what waits."""

    sends: list[Send] = field(default_factory=list)
    positions: dict[int, int] = field(default_factory=dict)
    put_back: list[Held] = field(default_factory=list)
    waiting: set[int] = field(default_factory=set)
    """Partitions whose head waits out the last milliseconds of a timer."""

    @property
    def not_before_ms(self) -> int:
        """The earliest the batch may commit: every record it consumes is due, and every timer
        it delivers has reached its deliver time."""
        return max(
            (
                s.entry.item.deliver_ms
                if s.kind == "deliver" and s.entry.item.deliver_ms is not None
                else s.entry.due_ms
                for s in self.sends
            ),
            default=0,
        )

    @property
    def entries(self) -> list[Held]:
        """The records the batch consumes, in order."""
        seen: dict[tuple[int, int], Held] = {}
        for send in self.sends:
            seen.setdefault((send.entry.partition, send.entry.offset), send.entry)
        return list(seen.values())


def hop_headers(message_id: str, deliver_ms: int, hop_due_ms: int) -> list[tuple[str, bytes]]:
    """The headers of a timer's SCHEDULE record."""
    return [
        (prop.UNIQ_KEY, message_id.encode()),
        (timer.DELIVER_HEADER, str(deliver_ms).encode()),
        (timer.HOP_DUE_HEADER, str(hop_due_ms).encode()),
    ]


def _marker(entry: Held, message_id: str, kind: bytes) -> Send:
    name: SendKind = "delivered" if kind == recall.DELIVERED else "dropped"
    return Send(
        entry,
        name,
        RECALLS,
        None,
        [(recall.KIND_HEADER, kind)],
        partition=0,
        key=message_id.encode(),
    )


def plan_batch(
    entries: Sequence[Held],
    *,
    now_ms: int,
    hops: HopTable,
    recalled: Callable[[str], bool],
    doomed: Mapping[tuple[int, int], str],
    partitions: Callable[[str], int],
    lookup: codec.SchemaSource | None = None,
    missing_grace_ms: int = 60_000,
    grants: ScheduleGrants | None = None,
) -> Batch:
    """What to do with due records: deliver each to its real topic (a timer only once its
    deliver time has come, else it hops on or waits; a ``recalled`` one is dropped); park the
    ones that can never be delivered (not decodable, addressed to a system topic, or ``doomed``
    by an earlier refusal no retry cures), with the reason; and set aside a record whose real
    topic does not exist (``partitions`` returns 0), then park it once it has waited
    ``missing_grace_ms`` (:mod:`adapter.schedule.aside`): its level goes on. With ``grants``,
    a record reaches only a topic its signer is granted."""
    batch = Batch()
    for entry in entries:
        if entry.partition in batch.waiting:
            batch.put_back.append(entry)
            continue
        reason = doomed.get((entry.partition, entry.offset))
        item = entry.item
        if reason is None and item.deliver_ms is not None and item.message_id is not None:
            if recalled(item.message_id):
                batch.sends.append(_marker(entry, item.message_id, recall.DROPPED))
                batch.positions[entry.partition] = entry.offset + 1
                continue
            step = timer.next_step(now_ms, item.deliver_ms, hops)
            if isinstance(step, timer.Wait):
                batch.waiting.add(entry.partition)
                batch.put_back.append(replace(entry, due_ms=step.until_ms))
                continue
            if isinstance(step, timer.Hop):
                headers = hop_headers(item.message_id, item.deliver_ms, step.due_ms)
                headers.extend(item.signed)
                hop = Send(entry, "hop", SCHEDULE, item.value, headers, partition=step.partition)
                batch.sends.append(hop)
                batch.positions[entry.partition] = entry.offset + 1
                continue
        delivery: Delivery | None = None
        topic, partition = POISON, None
        if reason is None:
            try:
                record = codec.decode_as(
                    ScheduledMessage, item.value, canonical=False, lookup=lookup
                )
                refused = refused_destination(record)
                if refused is None and grants is not None:
                    refused = grants.refusal(item.signer, record.topic)
                if refused is not None:
                    raise RefusedDestination(refused, topic=record.topic)
                delivery = delivered(record)
                message_id = item.message_id or record.unique_key
                topic = naming.sendable_kafka_topic(delivery.topic)
            except AdapterError as exc:
                reason, delivery = exc.reason, None
            except Exception as exc:  # noqa: BLE001 - one record never stops the forwarder
                reason, delivery = f"corrupt: {type(exc).__name__}: {exc}", None
        if delivery is None:
            headers = parked_headers(reason or "", SCHEDULE, entry.partition, entry.offset)
            batch.sends.append(Send(entry, "park", POISON, item.value, headers, reason=reason))
            batch.positions[entry.partition] = entry.offset + 1
            continue
        count = partitions(topic)
        if not count:
            batch.sends.append(
                set_aside(
                    entry,
                    delivery.topic,
                    message_id,
                    now_ms=now_ms,
                    grace_ms=missing_grace_ms,
                    hops=hops,
                )
            )
            batch.positions[entry.partition] = entry.offset + 1
            continue
        if 0 <= delivery.queue_id < count:
            partition = delivery.queue_id
        batch.sends.append(
            Send(entry, "deliver", topic, delivery.value, list(delivery.headers), partition,
                 delivery.key)
        )  # fmt: skip
        if item.deliver_ms is not None and item.message_id is not None:
            batch.sends.append(_marker(entry, item.message_id, recall.DELIVERED))
        batch.positions[entry.partition] = entry.offset + 1
    return batch
