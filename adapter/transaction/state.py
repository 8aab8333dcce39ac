"""The transaction coordinator's state for one HALF partition: a pure state machine.

Reproduces RocketMQ's ``EndTransactionProcessor`` and ``TransactionalMessageServiceImpl.check``
as decisions, without Kafka and without a clock (every input
carries ``now_ms``):

- an END decision is validated as ``checkPrepareMessage`` does (producer group, half offset,
  transaction id); a mismatch is refused. UNKNOWN changes nothing. A late producer END on a
  half message with ``CHECK_IMMUNITY_TIME_IN_SECONDS`` is refused past max(immunity, timeout),
  as RocketMQ 5.1.1+ does;
- each pending half message has its own due time: born + immunity (the transaction timeout,
  6 s, or ``CHECK_IMMUNITY_TIME_IN_SECONDS``; never less than ``EARLIEST_CHECK_MS``, 1.5 s),
  then every check interval (30 s); at a due time it is checked, or discarded once it was
  checked ``check_max`` (15) times or is older than the retention (72 h).

Beyond RocketMQ: a second decision for a resolved half message is a counted duplicate, never a
second delivery, and an END that arrives before its half message waits for it
(:mod:`adapter.transaction.waiting`). A HALF or END record delivered again
(:meth:`PartitionState.read_already`) is skipped. A half message written twice by one send
(same transaction id, group and born time: a producer retry across a leader change) is one
message: checked and delivered once, whichever copy its decision names. The producer's ack
names the last copy; an END naming a copy not read yet, while the same transaction is pending
at a lower offset, decides that pending first copy at once (waiting for the copy would let a
check decide it meanwhile), and the copy gets an OP record of its own, kept behind the
committed OP position until the copy is read, so a successor never takes it for a message of
its own. A message an operator resumes is born again, so it is a new one. A COMMIT the
producer delivered itself (the fast path, :mod:`adapter.transaction.group_commit`) resolves
the message without a second delivery, and its END is never refused for waiting; another
COMMIT of a message its producer may have appended directly is applied only once a search of
its queue can be final, with that search (:mod:`adapter.transaction.direct`). Checks wait
behind the partition's read mark (:mod:`adapter.transaction.read_mark`), which a rebuilt state
starts without. The state is rebuilt after a crash from the OP records (``recover_op``) and
the HALF and END records read again from the positions :meth:`PartitionState.positions`
returned at the last commit; see ``adapter/transaction/coordinator.py`` for the Kafka side.

Known gaps: a resolved half message's transaction id is remembered for the last
``RECENT_RESOLVED`` resolutions only; an older late decision is counted as a duplicate without
checking its transaction id. A copy the decision did not name (a check answer names the first
copy) is recognised when the first was read since the last takeover, or is still pending; a
takeover between the two copies, with the first resolved and behind the committed HALF
position, would make the second pending on its own. Two sends with one transaction id and
group (ids are unique per send; see :mod:`adapter.msgid`) would be taken for one.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from adapter.transaction.actions import Action, Check, Commit, Discard, Duplicate, Refuse, Rollback
from adapter.transaction.config import CheckPolicy
from adapter.transaction.direct import Step, on_commit
from adapter.transaction.half import HalfInfo, Pending, half_info
from adapter.transaction.half_state import HalfState, IllegalTransition, advance
from adapter.transaction.read_mark import ReadMark
from adapter.transaction.timing import EARLIEST_CHECK_MS
from adapter.transaction.waiting import Waiting, WaitingDecisions
from adapter.wire.records import EndTransaction, OpKind, OpRecord, TransactionDecision

__all__ = [
    "Action",
    "Check",
    "Commit",
    "Discard",
    "Duplicate",
    "HalfInfo",
    "HalfState",
    "IllegalTransition",
    "PartitionState",
    "Pending",
    "Refuse",
    "Rollback",
    "advance",
    "half_info",
]

P = TypeVar("P")

RECENT_RESOLVED = 100_000
"""How many resolutions are remembered to tell a mismatched late decision from a duplicate."""


_RESOLVING = frozenset({OpKind.COMMIT, OpKind.ROLLBACK, OpKind.DISCARD})
_Copy = tuple[str, str, int]
"""What makes two half messages one send: transaction id, producer group, born time."""


@dataclass(slots=True)
class _Recovered:
    """What the OP records say about half messages not read again yet."""

    resolved: dict[int, tuple[str, str]] = field(default_factory=dict)
    checks: dict[int, tuple[int, int]] = field(default_factory=dict)
    """half offset -> (check times, time of the last check)."""
    highest: int = -1


class PartitionState(Generic[P]):
    """The pending half messages of one partition and what to do with each decision."""

    def __init__(
        self,
        policy: CheckPolicy,
        *,
        half_start: int,
        end_start: int,
        op_start: int,
    ) -> None:
        self.policy = policy
        self._half_next = half_start
        self._end_next = end_start
        self._op_next = op_start
        self._op_floor: int | None = op_start
        self._pending: dict[int, Pending[P]] = {}
        self._pending_ids: dict[tuple[str, str], int] = {}
        """(transaction id, group) -> offset of its pending half message."""
        self._due: list[tuple[int, int]] = []
        self._waiting = WaitingDecisions()
        self.mark = ReadMark()
        """The check gate of this partition's END: a rebuilt state starts with it closed."""
        self._recent: OrderedDict[int, _Copy] = OrderedDict()
        self._first_of: dict[_Copy, int] = {}
        """(transaction id, group, born time) -> offset of its first half message, pending or
        recently resolved."""
        self._repeat_of: dict[int, int] = {}
        """Offset of a repeated half message -> offset of the first one."""
        self._decided_ahead: dict[int, int] = {}
        """Offset of a copy decided before it was read -> the OP position before its OP
        record: kept in the committed OP position until the copy is read."""
        self._recovered = _Recovered()

    # -- recovery -----------------------------------------------------------------------------

    def recover_op(self, op: OpRecord, op_offset: int) -> None:
        """Replay one OP record read back from the OP position of the last commit."""
        self._op_next = max(self._op_next, op_offset + 1)
        if op.half_offset < self._half_next:
            return  # resolved before the HALF position: nothing will be read again
        rec = self._recovered
        rec.highest = max(rec.highest, op.half_offset)
        if op.kind in _RESOLVING:
            rec.resolved[op.half_offset] = (op.transaction_id, op.producer_group)
            rec.checks.pop(op.half_offset, None)
        elif op.half_offset not in rec.resolved:
            rec.checks[op.half_offset] = (op.check_times, op.timestamp)

    def skip_op(self, op_offset: int) -> None:
        """The record at ``op_offset`` of OP is not an OP record of this partition (it is
        parked): the replay goes past it."""
        self._op_next = max(self._op_next, op_offset + 1)

    def recovery_done(self) -> None:
        """The OP replay reached the end of OP."""
        self._forget_recovered_behind()

    def op_written(self, next_op_offset: int) -> None:
        """OP records up to ``next_op_offset`` (exclusive) are committed."""
        self._op_next = max(self._op_next, next_op_offset)

    # -- inputs -------------------------------------------------------------------------------

    def read_already(self, offset: int, *, end: bool) -> bool:
        """Whether the record at ``offset`` of HALF (of END if ``end``) was read before. A
        consumer can deliver records again (a position reset after a leader change); a half
        message read again must not become pending again, nor be checked and delivered twice,
        so the caller skips such a record."""
        return offset < (self._end_next if end else self._half_next)

    def repeat_of(self, offset: int) -> int | None:
        """The offset of the first copy, if the half message at ``offset`` repeats one."""
        return self._repeat_of.get(offset)

    def half(self, offset: int, info: HalfInfo, payload: P, now_ms: int) -> list[Action[P]]:
        """A half message read from HALF at ``offset`` (offsets arrive in increasing order).

        One that repeats the transaction id, group and born time of an earlier half message
        is the same send written twice (a producer retry after a leader change: Kafka's
        idempotence does not hold across the producer's epoch bump). It is not pending on its
        own: a decision naming it applies to the first one, so the message is checked and
        delivered once. A resumed message is born again, so it is a new half message."""
        self._half_next = offset + 1
        self._decided_ahead.pop(offset, None)
        rec = self._recovered
        known = rec.resolved.pop(offset, None)
        actions: list[Action[P]] = []
        copy = info.copy_key
        first = self._first_of.get(copy)
        if first is not None and known is None:
            self._repeat_of[offset] = first
        elif known is not None:
            self._remember(offset, copy)
        else:
            self._first_of[copy] = offset
            pending = Pending(offset, info, payload, self._op_mark())
            checked = rec.checks.pop(offset, None)
            if checked is None:
                due = info.born_ms + max(self._immunity_ms(info), EARLIEST_CHECK_MS)
                pending.due_ms = max(due, info.searchable_ms or due)
            else:
                pending.check_times, last_check_ms = checked
                pending.due_ms = last_check_ms + self.policy.check_interval_ms
                if pending.check_times:
                    pending.state = advance(pending.state, HalfState.CHECKING)
            self._pending[offset] = pending
            self._pending_ids[(info.transaction_id, info.producer_group)] = offset
            heapq.heappush(self._due, (pending.due_ms, offset))
        self._forget_recovered_behind()
        waiting = self._waiting.take(offset)
        if offset in self._pending:
            # ENDs naming a later copy of this send, read before it: they decide this one.
            waiting += self._waiting.take_for(info.transaction_id, info.producer_group, offset)
        for w in sorted(waiting, key=lambda w: w.offset):
            actions.extend(self._decide(w.offset, w.end, now_ms, w.delivered))
        return actions

    def skip_half(self, offset: int) -> list[Action[P]]:
        """The record at ``offset`` of HALF is not a half message (it was parked)."""
        self._half_next = offset + 1
        self._decided_ahead.pop(offset, None)
        self._forget_recovered_behind()
        return [
            Refuse(w.offset, w.end, f"no half message at offset {offset}")
            for w in self._waiting.take(offset)
        ]

    def end(
        self, offset: int, end: EndTransaction, now_ms: int, *, delivered: bool = False
    ) -> list[Action[P]]:
        """A decision read from END at ``offset`` (offsets arrive in increasing order);
        ``delivered``: a COMMIT whose real message the producer's transaction wrote."""
        self._end_next = offset + 1
        if end.half_offset >= self._half_next and not self._names_a_pending_send(end):
            self._waiting.add(Waiting(offset, end, now_ms, delivered))
            return []
        return self._decide(offset, end, now_ms, delivered)

    def skip_end(self, offset: int) -> None:
        """The record at ``offset`` of END is not a decision (it was parked)."""
        self._end_next = offset + 1

    def due(
        self, now_ms: int, limit: int, decisions_read_to_ms: int | None = None
    ) -> list[Action[P]]:
        """Checks and discards that are due, at most ``limit``, earliest first.

        ``decisions_read_to_ms``: END has been read, read_committed, past a mark written at that
        time (None: no such bound). A message due later is not checked yet, since its decision
        may be unread in END, or still inside a producer's open Kafka transaction (RocketMQ's
        rule: check only once the op queue was read past the message); otherwise a backlog
        would cause a storm of needless checks, and a fast-path commit could race a check."""
        actions: list[Action[P]] = []
        policy = self.policy
        bound = now_ms if decisions_read_to_ms is None else min(now_ms, decisions_read_to_ms)
        while self._due and len(actions) < limit and self._due[0][0] <= bound:
            due_ms, offset = heapq.heappop(self._due)
            pending = self._pending.get(offset)
            if pending is None or pending.due_ms != due_ms:
                continue  # resolved, or re-scheduled
            if pending.held is not None:  # a COMMIT held until a search of its queue is final
                actions += self._apply(pending, pending.held[1], False, search=True)
            elif pending.check_times >= policy.check_max:
                actions.append(self._discard(pending, f"checked {pending.check_times} times"))
            elif now_ms - pending.info.born_ms > policy.retention_ms:
                actions.append(self._discard(pending, "older than the retention time"))
            else:
                pending.state = advance(pending.state, HalfState.CHECKING)
                pending.check_times += 1
                pending.due_ms = now_ms + policy.check_interval_ms
                heapq.heappush(self._due, (pending.due_ms, offset))
                actions.append(Check(pending))
        return actions

    def expire_waiting(self, now_ms: int, half_end_offset: int) -> list[Action[P]]:
        """Refuse ENDs that waited too long for a half message beyond HALF's end
        (``half_end_offset``, read fresh: a cached end may lag behind a leader change): a
        plain one after ``end_wait_ms``; one whose message its producer delivered only past
        the retention (:mod:`adapter.transaction.waiting`)."""
        policy = self.policy
        return [
            Refuse(w.offset, w.end, f"no half message at offset {w.end.half_offset}")
            for w in self._waiting.expire(
                now_ms, half_end_offset, policy.end_wait_ms, policy.retention_ms
            )
        ]

    def waiting_overdue(self, now_ms: int) -> bool:
        """Whether an END waited long enough that HALF's end is worth reading fresh."""
        policy = self.policy
        return self._waiting.overdue(now_ms, policy.end_wait_ms, policy.retention_ms)

    # -- reading the state --------------------------------------------------------------------

    def positions(self) -> tuple[int, int, int]:
        """HALF, END and OP positions to commit: reading again from them rebuilds this state."""
        half = min(self._pending, default=self._half_next)
        held = [p.held[0] for p in self._pending.values() if p.held is not None]
        end = min([*self._waiting.end_offsets(), *held], default=self._end_next)
        marks = [p.op_mark for p in self._pending.values()]
        marks += self._decided_ahead.values()
        if self._op_floor is not None:
            marks.append(self._op_floor)
        op = min(marks, default=self._op_next)
        return half, end, op

    def next_due_ms(self) -> int | None:
        while self._due:
            due_ms, offset = self._due[0]
            pending = self._pending.get(offset)
            if pending is not None and pending.due_ms == due_ms:
                return due_ms
            heapq.heappop(self._due)
        return None

    def wake_ms(self) -> int | None:
        """When the worker next has something to do here: the earliest due time, or, while
        a check due waits for a read mark, when that mark is next asked for again (the mark
        itself wakes the worker when it is read)."""
        due = self.next_due_ms()
        if due is None or not self.mark.blocks(due):
            return due
        again = self.mark.next_ask_ms()
        return due if again is None else again

    def pending(self) -> list[Pending[P]]:
        return sorted(self._pending.values(), key=lambda p: p.offset)

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def oldest_born_ms(self) -> int | None:
        return min((p.info.born_ms for p in self._pending.values()), default=None)

    def pending_at(self, offset: int) -> Pending[P] | None:
        return self._pending.get(offset)

    # -- internals ----------------------------------------------------------------------------

    def _names_a_pending_send(self, end: EndTransaction) -> bool:
        """An END naming an offset not read yet, whose transaction is pending at a lower one:
        the producer's ack named the second copy of a half message stored twice, and the
        decision is the pending first copy's, at once; waiting for the copy would let a check
        decide it meanwhile, and deliver a message its producer already delivered."""
        return (end.transaction_id, end.producer_group) in self._pending_ids

    def _immunity_ms(self, info: HalfInfo) -> int:
        if info.immunity_ms is not None:
            return info.immunity_ms
        return self.policy.transaction_timeout_ms

    def _op_mark(self) -> int:
        return self._op_next if self._op_floor is None else min(self._op_floor, self._op_next)

    def _forget_recovered_behind(self) -> None:
        """Once HALF is read past every offset the OP replay named, the replay is no longer
        needed: new half messages' OP records all lie after the current OP position."""
        rec = self._recovered
        if self._op_floor is not None and self._half_next > rec.highest:
            self._op_floor = None
            rec.resolved.clear()
            rec.checks.clear()

    def _decide(
        self, end_offset: int, end: EndTransaction, now_ms: int, delivered: bool
    ) -> list[Action[P]]:
        target = self._repeat_of.get(end.half_offset, end.half_offset)
        if end.half_offset >= self._half_next:
            first = self._pending_ids.get((end.transaction_id, end.producer_group))
            if first is None:  # a decision read with it decided the send a moment ago
                return [Duplicate(end_offset, end)]
            target = first
        pending = self._pending.get(target)
        if pending is None:
            known = self._recent.get(target)
            if known is not None and known[:2] != (end.transaction_id, end.producer_group):
                return [Refuse(end_offset, end, self._mismatch(end, known[0], known[1]))]
            return [Duplicate(end_offset, end)]
        info = pending.info
        if (end.transaction_id, end.producer_group) != (info.transaction_id, info.producer_group):
            why = self._mismatch(end, info.transaction_id, info.producer_group)
            return [Refuse(end_offset, end, why)]
        if end.decision is TransactionDecision.UNKNOWN:
            return []
        if pending.held is not None:
            return [Duplicate(end_offset, end)]  # the first decision stands, as in RocketMQ
        # A delivered decision was written within the fast-commit window by construction; its
        # message is out already, so it is never refused for coming late.
        if not end.from_check and not delivered and info.immunity_ms is not None:
            window = max(info.immunity_ms, self.policy.transaction_timeout_ms)
            if (late := now_ms - info.born_ms) > window:
                why = f"decision came {late} ms after birth, past the {window} ms immunity window"
                return [Refuse(end_offset, end, f"{why}; the check-back decides")]
        step = Step.RECORD
        if end.decision is TransactionDecision.COMMIT:
            step = on_commit(info.searchable_ms, now_ms, delivered=delivered)
            if step is Step.WAIT:  # a direct append may still land: applied once it cannot
                pending.held = (end_offset, end)  # END is read again from it after a crash
                pending.due_ms = info.searchable_ms or now_ms  # no check comes before it
                heapq.heappush(self._due, (pending.due_ms, pending.offset))
                return []
        return self._apply(pending, end, delivered, search=step is Step.SEARCH)

    def _apply(
        self, pending: Pending[P], end: EndTransaction, delivered: bool, *, search: bool
    ) -> list[Action[P]]:
        # A decision naming a copy not read yet records that copy as decided too, so that a
        # successor reading it after a crash never takes it for a message of its own.
        copies = (end.half_offset,) if end.half_offset >= self._half_next else ()
        for copy in copies:
            self._decided_ahead.setdefault(copy, self._op_mark())
        if end.decision is TransactionDecision.COMMIT:
            self._resolve(pending, HalfState.COMMITTED)
            return [Commit(pending, end, delivered, copies, search=search)]
        self._resolve(pending, HalfState.ROLLED_BACK)
        return [Rollback(pending, end, copies)]

    def _discard(self, pending: Pending[P], reason: str) -> Discard[P]:
        self._resolve(pending, HalfState.DISCARDED)
        return Discard(pending, reason)

    def _resolve(self, pending: Pending[P], to: HalfState) -> None:
        pending.state = advance(pending.state, to)
        del self._pending[pending.offset]
        key = (pending.info.transaction_id, pending.info.producer_group)
        if self._pending_ids.get(key) == pending.offset:
            del self._pending_ids[key]
        self._remember(pending.offset, pending.info.copy_key)

    def _remember(self, offset: int, who: _Copy) -> None:
        self._recent[offset] = who
        self._first_of[who] = offset
        if len(self._recent) > RECENT_RESOLVED:
            old, old_who = self._recent.popitem(last=False)
            if self._first_of.get(old_who) == old:
                del self._first_of[old_who]
            self._repeat_of = {r: f for r, f in self._repeat_of.items() if f != old}

    @staticmethod
    def _mismatch(end: EndTransaction, transaction_id: str, group: str) -> str:
        return (
            f"decision for half offset {end.half_offset} names transaction "
            f"{end.transaction_id!r} of group {end.producer_group!r}, but that half message is "
            f"transaction {transaction_id!r} of group {group!r}"
        )
