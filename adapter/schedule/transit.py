"""One batch of the schedule forwarder in its Kafka transaction, from begin to commit or abort.

What a batch learns while its records are produced lives here and dies with the transaction:
which records Kafka refused (their levels then wait and retry), and the offsets of the
DELIVERED markers of the timers it delivers (the recall check reads the recall log up to them,
:mod:`adapter.schedule.recall`). Nothing of one batch can leak into the next, as the
transaction coordinator's :class:`~adapter.transaction.turn.Turn` keeps one turn's work.

Known gaps: none of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import KafkaError
from confluent_kafka import Message as KafkaRecord

from adapter.schedule.held import Held, Send
from adapter.schedule.plan import Batch


@dataclass(eq=False)
class Transit:
    """A batch, and what its transaction has learnt so far."""

    batch: Batch
    doomed_before: frozenset[tuple[int, int]]
    """Records already given up on when the transaction began (level, offset)."""
    markers: dict[str, int] = field(default_factory=dict)
    """Timer id -> offset of its DELIVERED marker in the recall log (-1: not acknowledged)."""
    failed: list[tuple[Held, KafkaError]] = field(default_factory=list)
    """Records Kafka refused in this transaction, with its error."""

    def report_for(self, send: Send) -> Callable[[KafkaError | None, KafkaRecord], None]:
        """The delivery report of ``send``'s record: a refusal is noted; a DELIVERED marker's
        offset is kept."""
        entry = send.entry
        marker = send.key.decode() if send.kind == "delivered" and send.key is not None else None
        if marker is not None:
            self.markers[marker] = -1

        def report(error: KafkaError | None, record: KafkaRecord) -> None:
            if error is not None:
                self.failed.append((entry, error))
            elif marker is not None:
                self.markers[marker] = record.offset() or 0

        return report

    def markers_acknowledged(self) -> bool:
        return all(offset >= 0 for offset in self.markers.values())

    def failures(self) -> list[tuple[int, int, KafkaError]]:
        """(level partition, offset, error) of each record Kafka refused."""
        return [(entry.partition, entry.offset, error) for entry, error in self.failed]
