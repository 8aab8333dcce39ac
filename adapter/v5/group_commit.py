"""The answer of one group commit of share-group acknowledgements: who was refused, and why.

Reproduces what a 5.x proxy answers each ``ack``: done, or refused with its reason. On Kafka
the ``SimpleConsumer``'s threads that ack at the same time share one ``commit_sync``
(:class:`~adapter.v5.share_group.Member`), and Kafka takes or refuses all acknowledgements of
one partition in a commit together. So:

- a caller refused with its partition's batch learns that it was refused together with
  others (``shared_with``), not that its own lock ended; librdkafka refuses to acknowledge a
  record again once its commit failed (measured with 2.16: "Erroneous state"), so it cannot
  be retried alone, and comes back to the group;
- a partition that was acknowledged but is missing from the commit's answer was not
  confirmed (librdkafka drops an ack batch locally when the partition's leader changed): it
  is refused, never reported done, since the message will come back.

Pure: no Kafka calls; records are read for their topic and partition only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

__all__ = ["Key", "Refusal", "answer_group_commit", "key_of"]

Key = tuple[str, int]
Acks = Sequence[tuple[Any, Any]]
"""One caller's (record, acknowledge type) pairs."""


def key_of(record: Any) -> Key:
    """A record's (topic, partition)."""
    return (str(record.topic()), int(record.partition() or 0))


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why Kafka did not take a caller's acknowledgements of one partition."""

    error: KafkaError
    shared_with: int = 0
    """Other callers' acknowledgements of the partition refused with these in one commit."""
    unconfirmed: bool = False
    """The commit's answer did not name the partition."""

    @classmethod
    def of(cls, failure: KafkaException | KafkaError) -> Refusal:
        error = failure.args[0] if isinstance(failure, KafkaException) else failure
        if not isinstance(error, KafkaError):
            error = KafkaError(KafkaError._FAIL, str(failure))
        return cls(error)

    def __str__(self) -> str:
        if self.unconfirmed:
            return "Kafka did not confirm it (the partition's leader may have changed)"
        text = self.error.str()
        if self.shared_with:
            text += (
                f"; refused together with {self.shared_with} other acknowledgement(s) of the "
                "partition in one commit (Kafka takes or refuses them together)"
            )
        return text


def answer_group_commit(
    calls: Sequence[Acks], answer: Mapping[TopicPartition, KafkaException | None]
) -> list[dict[Key, Refusal]]:
    """What each caller's acknowledgements (``calls``, all sent in one commit) got from
    ``answer`` (``commit_sync``'s result): per (topic, partition), the refusal, if any."""
    answered = {(tp.topic, tp.partition): failure for tp, failure in answer.items()}
    sent = Counter(key_of(record) for acks in calls for record, _kind in acks)
    out = []
    for acks in calls:
        mine = Counter(key_of(record) for record, _kind in acks)
        refused: dict[Key, Refusal] = {}
        for key, count in mine.items():
            if key not in answered:
                refused[key] = Refusal(KafkaError(KafkaError._STATE), unconfirmed=True)
            elif (failure := answered[key]) is not None:
                refused[key] = Refusal(Refusal.of(failure).error, shared_with=sent[key] - count)
        out.append(refused)
    return out
