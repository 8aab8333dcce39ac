"""A due record whose real topic does not exist: set aside and retried, then parked (pure).

RocketMQ's ``ScheduleMessageService`` writes a due message into its commit log whatever its
topic, so a deleted topic never holds a level back there. On Kafka the topic must exist
(auto-creation is off on a production cluster; an operator may be creating it). Holding the
level until it appears made each such record stop every later record of its level for the
whole grace: 1,000 retries of a deleted consumer group held a level for 17 to 25 hours.

So the record is set aside instead, in the transaction that consumes it: written again to
``SCHEDULE_TOPIC_XXXX`` as a hop (header ``rmq.hop_due``, on the forwarder's clock) on the
partition of its next wait, with the time of its first refusal (header
:data:`SINCE_HEADER`), and the level goes on. Waits double from :data:`FIRST_WAIT_MS` up to
:data:`LONGEST_WAIT_MS` (rounded down to a partition's delay). Once the topic exists it is
delivered; once it has waited ``grace_ms`` it is parked in ``RMQ_SYS_POISON_TOPIC`` with
reason ``missing topic``. Exactly once holds: the new copy and the consumed position commit
together, like a timer's hop.

Known gaps: a record set aside leaves its level's order: it may reach its topic after later
records of its level sent to that topic once it exists. It is parked at its first retry past
the grace, so up to one wait (at most 30 s) later.
"""

from __future__ import annotations

from adapter import naming
from adapter import properties as prop
from adapter.hops import HopTable
from adapter.kafka.worker import parked_headers
from adapter.schedule import timer
from adapter.schedule.head_of_line import Entry
from adapter.schedule.held import Parked, Send

SCHEDULE = naming.kafka_topic(naming.SCHEDULE_TOPIC)
POISON = naming.kafka_topic(naming.POISON_TOPIC)

SINCE_HEADER = "rmq.missing_since"
"""When the forwarder first found the record's topic missing, epoch ms on its clock."""
FIRST_WAIT_MS = 100
LONGEST_WAIT_MS = 30_000


def set_aside(
    entry: Entry[Parked],
    topic: str,
    message_id: str,
    *,
    now_ms: int,
    grace_ms: int,
    hops: HopTable,
) -> Send:
    """What to do with ``entry``, due now but addressed to ``topic``, which does not exist:
    its next hop, or (past ``grace_ms`` since its first refusal) its parking."""
    item = entry.item
    since = item.missing_since_ms if item.missing_since_ms is not None else now_ms
    waited = max(0, now_ms - since)
    if waited >= grace_ms:
        why = f"missing topic: {topic!r} did not exist for {waited / 1000:.1f} s"
        headers = parked_headers(why, SCHEDULE, entry.partition, entry.offset)
        return Send(entry, "park", POISON, item.value, headers, reason=why)
    wait = min(LONGEST_WAIT_MS, max(FIRST_WAIT_MS, waited))
    partition = hops.partition_for(wait)
    if partition is None:
        partition = hops.shortest_partition
    headers = [
        (prop.UNIQ_KEY, message_id.encode()),
        (timer.HOP_DUE_HEADER, str(now_ms + hops.delay_ms(partition)).encode()),
        (SINCE_HEADER, str(since).encode()),
    ]
    if item.deliver_ms is not None:
        headers.append((timer.DELIVER_HEADER, str(item.deliver_ms).encode()))
    headers.extend(item.signed)
    why = f"missing topic: {topic!r}"
    return Send(entry, "aside", SCHEDULE, item.value, headers, partition=partition, reason=why)
