"""Each console page's data, from the cores the ``rmq-adapter`` commands run.

Not a RocketMQ behaviour by itself: the pages of rocketmq-dashboard, each a call into
:mod:`adapter.ops` or :mod:`adapter.transaction.admin` (the same functions ``status``,
``transactions``, ``message``, ``groups`` and ``dlq`` call), turned into a template's context.
Nothing here reads or writes Kafka by itself.

Known gaps: the overview sums the lag of at most :data:`OVERVIEW_GROUPS` groups (one admin
round trip each); the groups page lists them all.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from adapter import naming
from adapter.clock import SYSTEM_CLOCK, Clock
from adapter.console.config import ConsoleConfig
from adapter.console.forms import Fields, FormError, one, required, reset_target
from adapter.console.proxies import probe_all
from adapter.kafka import clients
from adapter.ops import lifecycle, status
from adapter.ops.all_groups import AllGroups
from adapter.ops.dead_letter_records import selected
from adapter.ops.dead_letters import DeadLetters
from adapter.ops.dlq_cli import render_outcome
from adapter.ops.groups import EARLIEST, LATEST, GroupError, Groups
from adapter.ops.groups_cli import model_of, render_plan
from adapter.ops.message_cli import QUERY_HEADER, query_rows, window
from adapter.ops.message_index import MessageIndex
from adapter.ops.message_search import MessageSearch
from adapter.ops.offset_reset import totals
from adapter.ops.options import parse_time
from adapter.transaction import admin, admin_view

Context = dict[str, Any]
OVERVIEW_GROUPS = 50
PROXY_TIMEOUT_S = 2.0
WORKER_GROUPS = (naming.SCHEDULE_FORWARDER_GROUP, naming.TRANS_COORDINATOR_GROUP)


def age(ms: int) -> str:
    return status.duration(max(ms, 0))


class Pages:
    """The pages of one console; each Kafka call waits at most the config's timeout."""

    def __init__(self, config: ConsoleConfig, clock: Clock = SYSTEM_CLOCK) -> None:
        self._config = config
        self._clock = clock
        self._conf = config.kafka.librdkafka({})
        self._timeout = config.timeout_s

    def _groups(self) -> AllGroups:
        return AllGroups(self._conf, self._timeout)

    def overview(self, _query: Fields) -> Context:
        metadata = clients.reach(self._conf, self._timeout).topics
        topics = []
        for kafka_topic in sorted(metadata):
            name = naming.decode(kafka_topic)
            if kafka_topic.startswith("__"):
                continue
            kind = "application"
            if naming.is_system_topic(name) or name == naming.SCHEDULE_TOPIC:
                kind = "system"
            elif naming.group_of(name) is not None:
                kind = name[1 : name.index("%", 1)].lower()  # retry, dlq, check
            topics.append((name, len(metadata[kafka_topic].partitions), kind))
        groups = self._groups()
        workers = []
        rows, _ = groups.rows()
        present = {r.group for r in rows}
        for group in WORKER_GROUPS:
            if group in present:
                lag = groups.lag(group)
                workers += [(group, m.client_id, m.host, len(m.queues)) for m in lag.members]
                if not lag.members:
                    workers.append((group, "(no member online)", "-", 0))
        lags = []
        for row in [r for r in rows if not r.system][:OVERVIEW_GROUPS]:
            group_id = row.group if row.instance is None else f"{row.group}@{row.instance}"
            try:
                lag = groups.lag(group_id)
            except GroupError:
                continue
            lags.append((group_id, row.state, row.members, sum(q.lag for q in lag.queues)))
        online = sum(1 for w in workers if w[3])
        proxies = probe_all(self._config.proxies, min(self._timeout, PROXY_TIMEOUT_S))
        return {
            "topics": topics,
            "workers": workers,
            "online": online,
            "lags": lags,
            "proxies": proxies,
            "proxies_ready": sum(1 for p in proxies if p.ready),
        }

    def transactions(self, query: Fields) -> Context:
        group, topic = one(query, "group"), one(query, "topic")
        now = self._clock.now_ms()
        skipped: list[str] = []
        with ThreadPoolExecutor(2, thread_name_prefix="console-transactions") as both:
            # Each reads its topics to their end, a second or so: the two at once.
            reading = both.submit(admin.pending, self._config.kafka, self._timeout)
            discarded = admin.discarded(self._config.kafka, self._timeout, skipped=skipped)
            pending = admin_view.select(reading.result(), group=group, topic=topic)
        parked = admin_view.select(discarded, group=group, topic=topic)
        oldest = max((now - r.born_ms for r in pending), default=None)
        return {
            "pending": [(r, age(now - r.born_ms)) for r in pending],
            "parked": [
                (
                    r,
                    age(now - r.born_ms),
                    None if r.resumed_at_ms is None else age(now - r.resumed_at_ms),
                )
                for r in parked
            ],
            "oldest": None if oldest is None else age(oldest),
            "checks": sum(r.check_times for r in pending),
            "skipped": skipped,
            "group": group or "",
            "topic": topic or "",
        }

    def resume(self, form: Fields) -> str:
        transaction_id = required(form, "transaction_id", "the transaction id")
        done = admin.resume(self._config.kafka, transaction_id, timeout_s=self._timeout)
        return f"resumed {transaction_id} as half message {done.partition}@{done.offset}"

    def delays(self, _query: Fields) -> Context:
        levels, groups = status.gather(self._config.kafka, self._config.levels, self._timeout)
        now = self._clock.now_ms()
        rows = [
            (
                *status.level_cells(row, now),
                row.oldest_due_ms is not None and row.oldest_due_ms <= now,
            )
            for row in levels
        ]
        return {"levels": rows, "groups": groups}

    def _search(self, query: Fields) -> MessageSearch:
        begin_ms, end_ms = window(one(query, "begin"), one(query, "end"), self._clock.now_ms())
        index = self._config.index
        found_by = None if index is None else MessageIndex(index)
        return MessageSearch(self._conf, begin_ms, end_ms, self._timeout, found_by)

    def messages(self, query: Fields) -> Context:
        msg_id, topic = one(query, "id"), one(query, "topic")
        context: Context = {
            "query": {k: one(query, k) or "" for k in ("id", "topic", "key", "tag", "begin", "end")}
        }
        if msg_id:
            life = self._search(query).show(msg_id, [topic] if topic else [])
            context["life"] = {
                "id": msg_id,
                "steps": lifecycle.timeline(life.steps),
                "groups": life.groups,
                "summary": life.summary(),
            }
        elif topic:
            found, life = self._search(query).query(topic, one(query, "key"), one(query, "tag"))
            context["found"] = {
                "header": QUERY_HEADER,
                "rows": query_rows(found),
                "summary": life.summary(),
            }
        return context

    def groups(self, _query: Fields) -> Context:
        rows, note = self._groups().rows()
        return {"rows": [(r, model_of(r)) for r in rows if not r.system], "note": note}

    def group(self, query: Fields) -> Context:
        group = required(query, "group", "a group")
        return {"lag": self._groups().lag(group)}

    def reset(self, fields: Fields, *, execute: bool) -> Context:
        group = required(fields, "group", "a group")
        target = reset_target(fields)
        moves = self._groups().reset(group, one(fields, "topic"), target, execute=execute)
        return {
            "group": group,
            "moves": moves,
            "totals": totals(moves),
            "text": render_plan(group, target, moves, executed=execute),
            "executed": execute,
            "form": {k: one(fields, k) or "" for k in ("group", "topic", "kind", "value")},
        }

    def dlq_groups(self, _query: Fields) -> Context:
        metadata = clients.reach(self._conf, self._timeout).topics
        topics = sorted(t for t in metadata if naming.decode(t).startswith(naming.DLQ_PREFIX))
        groups = Groups(self._conf, self._timeout)
        partitions = groups.partitions(topics)
        ends, starts = groups.offsets(partitions, LATEST), groups.offsets(partitions, EARLIEST)
        counts: dict[str, int] = {}
        for (topic, _), end in ends.items():
            name = naming.group_of(naming.decode(topic)) or topic
            counts[name] = counts.get(name, 0) + end - starts[(topic, _)]
        return {"groups": sorted(counts.items())}

    def dlq(self, query: Fields) -> Context:
        group = required(query, "group", "a group")
        begin = one(query, "begin")
        begin_ms = None if begin is None else parse_time(begin)
        dead = DeadLetters(self._conf, group, self._timeout)
        return {"group": group, "topic": dead.dlq_topic, "letters": list(dead.read(begin_ms))}

    def resend(self, form: Fields) -> list[str]:
        group = required(form, "group", "a group")
        ids = [i.strip() for i in form.get("msg_id", []) if i.strip()]
        if not ids:
            raise FormError("choose the dead letters to resend")
        dead = DeadLetters(self._conf, group, self._timeout)
        chosen = selected(list(dead.read()), ids, None, None)
        lines = [render_outcome(o) for o in dead.resend(chosen)]
        missing = sorted(set(ids) - {letter.msg_id for letter in chosen})
        if missing:
            lines.append(f"no dead letter with id {', '.join(missing)}")
        return lines
