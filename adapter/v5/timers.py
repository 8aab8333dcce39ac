"""Timer messages of the 5.x producer: ``delivery_timestamp`` and ``recall_message``.

Reproduces RocketMQ 5's timer messages as the 5.x client sends them: a message with
``delivery_timestamp`` is delivered at that time, not before, and its ``SendReceipt`` carries a
recall handle (RocketMQ 5.5) that ``recall_message(topic, handle)`` uses to cancel it. The timer
is parked on the first hop of :mod:`adapter.schedule.timer`; the schedule forwarder does the
rest, exactly once. The delivered message carries ``TIMER_DELIVER_MS``, as RocketMQ's does, and
a 5.x consumer sees it as ``delivery_timestamp``.

``delivery_timestamp`` is in milliseconds, as the 5.x ``Message`` documents; a value under
10^11 is read as seconds (year 5138 in seconds, 1973 in milliseconds), because the 5.x client
puts the value into a protobuf ``Timestamp``'s seconds and its delay example sends
``int(time.time()) + 10``. The message's setter makes it whole milliseconds, or refuses it
(:func:`adapter.v5.delivery_time.epoch_ms`), so what reaches this module is an ``int``.

Known gaps: a deliver time in the past is sent as a normal message at once (RocketMQ's broker
does the same). Up to 40 days ahead (RocketMQ: 3 days on the broker, 1 day through the proxy).
"""

from __future__ import annotations

from adapter import properties as prop
from adapter.hops import HopTable
from adapter.kafka.topics import check_schedule_partitions
from adapter.message import Message as WireMessage
from adapter.producer.sender import SCHEDULE, Outgoing, Sender
from adapter.schedule import recall_log
from adapter.schedule.envelope import scheduled
from adapter.schedule.plan import hop_headers
from adapter.schedule.recall import RecallHandle
from adapter.schedule.signing import signed
from adapter.schedule.timer import check_deliver_time, first_hop
from adapter.wire import codec


def timer_record(
    sender: Sender, message: WireMessage, message_id: str, deliver_at_ms: int
) -> Outgoing | None:
    """The SCHEDULE record of a timer message; None when its time has come already (send it
    as a normal message). ``ValueError`` for a time too far ahead; ``AdapterError`` when the
    topics are not ready for timers."""
    now = sender.clock.now_ms()
    check_deliver_time(deliver_at_ms, now)
    sender.check(message)
    levels = sender.config.delay_levels
    hop = first_hop(now, deliver_at_ms, HopTable.of(levels))
    if hop is None:
        return None
    check_schedule_partitions(sender.topics, levels)
    parked = scheduled(message, level=0, unique_key=message_id, born_ms=now)
    parked.properties[prop.TIMER_DELIVER_MS] = str(deliver_at_ms)
    value = codec.encode(parked)
    headers = hop_headers(message_id, deliver_at_ms, hop.due_ms)
    headers += signed(value, sender.config.schedule_signer)
    return Outgoing(SCHEDULE, value, headers, hop.partition, None)


def recall_handle(sender: Sender, topic: str, message_id: str, deliver_at_ms: int) -> str:
    """The recall handle of a timer, sealed for the sender's Kafka cluster."""
    return RecallHandle(topic, message_id, deliver_at_ms).encode(sender.cluster_id())


def recall(sender: Sender, topic: str, handle: str) -> str:
    """Recall the timer of ``handle``; its message id. ``BadRecallHandle`` for a handle that is
    not valid for ``topic`` (altered, or issued on another cluster), ``AdapterError`` when the
    message was delivered already."""
    parsed = RecallHandle.decode(handle, topic, sender.cluster_id())
    conf = sender.config.kafka.librdkafka({})
    recall_log.recall(
        sender.client, conf, parsed, sender.timeout_s, reports_served=True, clock=sender.clock
    )
    return parsed.message_id
