"""Every group an operator means by a RocketMQ group name: a Kafka consumer group, else a share
group (the 5.x ``SimpleConsumer``'s).

RocketMQ has one kind of group; the adapter keeps two on Kafka (:mod:`adapter.ops.groups` and
:mod:`adapter.ops.share_groups`). ``rmq-adapter groups`` and the console's groups pages both go
through here, so that a name is looked up the same way everywhere: as a consumer group first,
then as a share group.

Known gaps: share groups are read over plaintext listeners only; :meth:`AllGroups.rows` says
why they are left out elsewhere, and a name that is no consumer group's gets an error saying
why no share group was looked up.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from adapter.ops.groups import GroupLag, GroupRow, Groups, NoGroupError
from adapter.ops.offset_reset import Move, Target, plan
from adapter.ops.share_groups import ShareGroups, ShareGroupsUnavailable

__all__ = ["AllGroups"]

T = TypeVar("T")


class AllGroups:
    """Consumer groups and share groups behind one name; each call waits at most ``timeout_s``."""

    def __init__(self, conf: Mapping[str, Any], timeout_s: float) -> None:
        self.consumer_groups = Groups(conf, timeout_s)
        self._share = ShareGroups(self.consumer_groups, conf, timeout_s)

    def rows(self) -> tuple[list[GroupRow], str | None]:
        """Every group by name, and why share groups are left out (``None``: they are not)."""
        rows = self.consumer_groups.rows()
        try:
            rows = [*rows, *self._share.rows()]
        except ShareGroupsUnavailable as exc:
            return rows, f"share groups not listed: {exc}"
        return sorted(rows, key=lambda r: r.group), None

    def lag(self, group: str) -> GroupLag:
        try:
            return self.consumer_groups.lag(group)
        except NoGroupError as exc:
            return _as_share(exc, lambda: self._share.lag(group))

    def reset(self, group: str, topic: str | None, target: Target, *, execute: bool) -> list[Move]:
        """The plan of moving ``group`` to ``target``; carried out only with ``execute``."""
        runner: Groups | ShareGroups = self.consumer_groups
        try:
            queues = runner.queues(group, topic, target)
        except NoGroupError as exc:
            runner = self._share
            queues = _as_share(exc, lambda: self._share.queues(group, topic, target))
        moves = plan(queues, target)
        if execute:
            runner.execute(group, moves)
        return moves


def _as_share(missing: NoGroupError, call: Callable[[], T]) -> T:
    """``call`` on share groups, once a name is no consumer group's; if share groups cannot be
    read here, the consumer group's error, saying why no share group was looked for."""
    try:
        return call()
    except ShareGroupsUnavailable as exc:
        raise NoGroupError(f"{missing}; no share group looked up: {exc}") from exc
