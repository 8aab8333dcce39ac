"""Property values that are not UTF-8 text, carried reversibly through the adapter's text records.

RocketMQ's properties are Java strings, and the adapter's system records hold them as Avro
strings. Kafka headers are bytes, and foreign writers put binary values there (Spring writes
``kafka_dlt-original-offset`` as eight bytes). A failed message goes back through
``SCHEDULE_TOPIC_XXXX`` to ``%RETRY%<group>`` as such a record, so its consumer send-back
(:func:`adapter.schedule.envelope.sent_back`) carries each value that is not UTF-8 as
``rmq.bytes.<name>`` = the value in base64, and the consumer restores it (:func:`restored`)
when it reads the retry topic or writes a dead letter. A header whose name already starts with
``rmq.bytes.`` is carried the same way, so the round trip gives back exactly what was sent.

Known gaps: a plain Kafka consumer of a retry topic sees the ``rmq.bytes.`` form.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable

PREFIX = "rmq.bytes."


def as_text(name: str, value: bytes) -> tuple[str, str]:
    """The (name, text) a text record carries for property ``name``: itself when it is UTF-8,
    else ``rmq.bytes.<name>`` and the value in base64."""
    if not name.startswith(PREFIX):
        try:
            return name, value.decode("utf-8")
        except UnicodeDecodeError:
            pass
    return PREFIX + name, base64.b64encode(value).decode("ascii")


def restored(headers: Iterable[tuple[str, str | bytes | None]]) -> list[tuple[str, bytes | None]]:
    """``headers`` with every ``rmq.bytes.<name>`` turned back into ``<name>`` and its bytes
    (replacing a text stand-in of the same name); one that is not base64 is left as it is."""
    kept: list[tuple[str, bytes | None]] = []
    restored_values: dict[str, bytes] = {}
    for name, value in headers:
        raw = value.encode("utf-8") if isinstance(value, str) else value
        if name.startswith(PREFIX) and raw is not None:
            try:
                restored_values[name[len(PREFIX) :]] = base64.b64decode(raw, validate=True)
                continue
            except (binascii.Error, ValueError):
                pass
        kept.append((name, raw))
    if not restored_values:
        return kept
    return [h for h in kept if h[0] not in restored_values] + list(restored_values.items())
