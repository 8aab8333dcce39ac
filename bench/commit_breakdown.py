"""Where a committed message's time goes, from ``local_execute`` to a reader (issue 33).

One ``TransactionMQProducer`` on the fast path (8 threads sharing it, 100 B bodies, paced) sends
N messages whose local transaction answers COMMIT; a read_committed reader of the real topic in
a child process stamps each body's first arrival; the producer's group committer tells, for
every group, when each step happened (``GroupCommitter.observe``). Per message, in ms:

- ``to submit``: ``local_execute`` returned COMMIT -> the decision reaches the committer;
- ``begin + produce``: its records in the open Kafka transaction (begin, when it is the first);
- ``linger + lane``: -> the committer takes its group (the group's linger, then its turn);
- ``flush``: -> every record of the group acknowledged;
- ``commit``: -> ``commit_transaction`` returned;
- ``markers + fetch``: -> the reader saw it (the commit's markers written, then fetched);
- ``total``: ``local_execute`` -> seen, the commit-to-visible figure of bench/rocketmq.py.

``--hog K`` runs K busy processes beside it, as a slower machine (the issue's CPU hog).
``python -m bench.commit_breakdown [--messages N] [--pace P] [--hog K]``.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import statistics
import time
from collections.abc import Iterator

from adapter.client import Message, TransactionStatus
from adapter.kafka import topics
from adapter.transaction.group_commit import GroupTimes
from bench.common import Coordinator, Table, kafka, new_topic
from bench.rocketmq_adapter import LEVELS
from bench.transactions import OUT, Reader, Transactions, body, run_threads

STEPS = ("to submit", "begin + produce", "linger + lane", "flush", "commit", "markers + fetch")


def _spin() -> None:
    while True:
        pass


@contextlib.contextmanager
def hogs(count: int) -> Iterator[None]:
    """``count`` processes spinning on a core each, stopped afterwards."""
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(count)]
    for spinner in spinners:
        spinner.start()
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.join(5)


def measure(bootstrap: str, n: int, pace: float) -> dict[str, list[float]]:
    """Every message's steps, in ms."""
    tx = Transactions(bootstrap, TransactionStatus.COMMIT)
    committer = tx.producer.fast_path
    if committer is None:
        raise RuntimeError("the producer has no fast path (RMQ_ADAPTER_FAST_COMMIT=0?)")
    groups: list[GroupTimes] = []
    ids: dict[str, bytes] = {}
    try:
        tx.send(new_topic(bootstrap, 4, "BreakdownWarmUp"), body("warm", 0, 100))
        topic = new_topic(bootstrap, 4, "Breakdown", prime=True)
        committer.observe = groups.append
        reader = Reader(bootstrap, topic, n, timeout=max(120.0, n / 50))
        wall_minus_mono = time.time() - time.monotonic()

        def send(i: int) -> None:
            message = Message(topic)
            message.set_body(body("b", i, 100))
            result = tx.producer.send_message_in_transaction(message, tx.local_execute)
            ids[result.msg_id] = body("b", i, 100)

        run_threads(n, send, deadline_s=n / pace + 120, per_second=pace)
        got, _ = reader.wait()
    finally:
        tx.close()
    steps: dict[str, list[float]] = {name: [] for name in (*STEPS, "total")}
    for group in groups:
        if not group.ok:
            continue
        for message_id, (began, produced) in zip(group.message_ids, group.handed, strict=True):
            payload = ids.get(message_id)
            if payload is None or payload not in got or payload not in tx.committed_at:
                continue
            decided = tx.committed_at[payload] / 1000 - wall_minus_mono
            seen = got[payload] / 1000 - wall_minus_mono
            marks = (decided, began, produced, group.taken, group.flushed, group.committed, seen)
            for name, start, end in zip(STEPS, marks, marks[1:], strict=False):
                steps[name].append((end - start) * 1000)
            steps["total"].append((seen - decided) * 1000)
    return steps


def _cell(values: list[float]) -> str:
    if len(values) < 2:
        return "-"
    q = statistics.quantiles(values, n=100, method="inclusive")
    return f"{q[49]:.1f} / {q[98]:.1f} / {max(values):.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=2_000)
    parser.add_argument("--pace", type=float, default=500.0)
    parser.add_argument("--hog", type=int, default=0, help="busy processes beside it")
    args = parser.parse_args()
    with kafka() as bootstrap:
        topics.init_topics({"bootstrap.servers": bootstrap}, topics.system_layout(8, LEVELS))
        coordinator = Coordinator(bootstrap, OUT, "breakdown")
        try:
            coordinator.wait_ready()
            with hogs(args.hog):
                steps = measure(bootstrap, args.messages, args.pace)
        finally:
            coordinator.stop()
    table = Table(
        f"Commit-to-visible, step by step: {args.messages:,} at {args.pace:,.0f}/s, "
        f"{args.hog} busy processes beside it ({len(steps['total']):,} measured)"
    )
    for name in (*STEPS, "total"):
        table.add(name, _cell(steps[name]))
    table.print(("step", "p50 / p99 / max ms"))


if __name__ == "__main__":
    main()
