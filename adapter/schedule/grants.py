"""Which application may reach which topic through the forwarder: the schedule grants.

RocketMQ's broker checks a client's permission on the topic it sends to, even a delayed
message's; on Kafka the forwarder writes the real topic later, with the workers' principal. A
forwarder started with ``--schedule-grants FILE`` (``RMQ_ADAPTER_SCHEDULE_GRANTS``) plays that
check: it takes only records signed by an application of the file
(:mod:`adapter.schedule.signing`), and delivers each only to that application's own topics, or
to its consumer groups' ``%RETRY%`` topics (a send-back). Anything else is parked with reason
``refused destination``. The file, JSON, mirrors the ACL table's per-application rows::

    {"applications": {
        "orders": {"key": "<at least 16 characters>",
                   "topics": ["Orders"], "consumer_groups": ["GID_orders"]}}}

Known gaps: the file is read at start; change it, then restart the forwarders one by one.
Without the file the forwarder takes unsigned records from any writer of SCHEDULE (the
system, ``%CHECK%`` and ``%DLQ%`` topics are refused either way: :mod:`.destinations`).
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapter import naming
from adapter.exceptions import ConfigError
from adapter.schedule.signing import check_key, signature

UNSIGNED = "unsigned: this forwarder takes records signed by a granted application"


class Unsigned(ValueError):
    """A record the grants do not let through: unsigned, unknown signer, or a bad signature."""


@dataclass(frozen=True, slots=True)
class ApplicationGrant:
    """One application: its key, and the topics it may reach through the forwarder."""

    name: str
    key: bytes = field(repr=False)
    topics: frozenset[str]
    consumer_groups: frozenset[str] = frozenset()

    def may_reach(self, topic: str) -> bool:
        """``topic`` (a RocketMQ name) is one of its topics or its groups' retry topics."""
        return topic in self.topics or any(
            topic == naming.retry_topic(group) for group in self.consumer_groups
        )


@dataclass(frozen=True, slots=True)
class ScheduleGrants:
    """Every application that may write SCHEDULE, by name."""

    applications: Mapping[str, ApplicationGrant]

    def signer_of(self, signer: bytes | None, sig: bytes | None, value: bytes) -> str:
        """The name of the application that signed ``value``; :class:`Unsigned` when no
        application of the grants did."""
        if signer is None or sig is None:
            raise Unsigned(UNSIGNED)
        name = signer.decode("utf-8", errors="replace")
        grant = self.applications.get(name)
        if grant is None:
            raise Unsigned(f"signer {name[:80]!r} has no grant")
        if not hmac.compare_digest(sig, signature(name, grant.key, value)):
            raise Unsigned(f"the signature of {name!r} does not match the record")
        return name

    def refusal(self, signer: str | None, topic: str) -> str | None:
        """Why ``signer`` may not reach ``topic``; None when it may."""
        grant = self.applications.get(signer or "")
        if grant is None:
            return UNSIGNED
        if not grant.may_reach(topic):
            return f"{signer!r} is not granted {topic!r}"
        return None

    @classmethod
    def parse(cls, text: str, where: str) -> ScheduleGrants:
        """The grants of a JSON document; :class:`ConfigError` naming ``where`` and the fault."""
        try:
            document = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"{where}: not JSON ({exc})") from exc
        apps = document.get("applications") if isinstance(document, dict) else None
        if not isinstance(apps, dict) or not apps:
            raise ConfigError(f"{where}: needs an object 'applications' naming at least one")
        return cls({name: _grant(name, entry, where) for name, entry in apps.items()})

    @classmethod
    def load(cls, path: str | Path) -> ScheduleGrants:
        """The grants of the file at ``path``."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read the schedule grants {path}: {exc.strerror}") from exc
        return cls.parse(text, str(path))


def _grant(name: str, entry: Any, where: str) -> ApplicationGrant:
    here = f"{where}: application {name!r}"
    if not isinstance(entry, dict):
        raise ConfigError(f"{here}: must be an object with 'key' and 'topics'")
    unknown = set(entry) - {"key", "topics", "consumer_groups"}
    if unknown:
        raise ConfigError(f"{here}: unknown fields {sorted(unknown)}")
    key = entry.get("key")
    if not isinstance(key, str):
        raise ConfigError(f"{here}: 'key' must be a string")
    return ApplicationGrant(
        name,
        check_key(name, key, here),
        _names(entry.get("topics", []), f"{here}: 'topics'"),
        _names(entry.get("consumer_groups", []), f"{here}: 'consumer_groups'"),
    )


def _names(value: Any, where: str) -> frozenset[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{where} must be a list of names")
    return frozenset(value)
