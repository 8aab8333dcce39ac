"""SQL92 filters in memory: messages per second through a parsed expression.

100,000 property maps (as a consumer holds them: Kafka header bytes, with ``TAGS``, ``KEYS``,
``UNIQ_KEY`` and three user properties) go through :func:`adapter.message_filter.admits` with a
typical SQL92 expression, as the 5.x consumers call it for every record; beside it, the same
expression over maps already decoded to text (the evaluator alone), and a tag filter
(``TagA||TagB``) for scale. No Kafka: this is the client-side cost per message.

Run: ``python -m bench.sql92 [--messages N] [--expression SQL]``.
Known gaps: one process, one thread; the cost of reading the records from Kafka is not here.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable, Sequence

from adapter import sql92
from adapter.message_filter import admits
from adapter.tags import TagFilter
from bench.common import Table, rate

TYPICAL = "region IN ('eu', 'us') AND amount > 100 AND TAGS <> 'TagC' AND priority IS NOT NULL"


def messages(count: int, seed: int = 7) -> list[dict[str, bytes]]:
    pick = random.Random(seed)
    out = []
    for n in range(count):
        props = {
            "TAGS": pick.choice([b"TagA", b"TagB", b"TagC"]),
            "KEYS": f"order-{n}".encode(),
            "UNIQ_KEY": f"{n:032X}".encode(),
            "region": pick.choice([b"eu", b"us", b"asia"]),
            "amount": str(pick.randint(1, 1000)).encode(),
        }
        if pick.random() < 0.8:
            props["priority"] = b"high"
        out.append(props)
    return out


def timed(
    check: Callable[[dict[str, bytes]], bool], batch: Sequence[dict[str, bytes]]
) -> tuple[float, int]:
    start = time.perf_counter()
    kept = sum(1 for props in batch if check(props))
    return time.perf_counter() - start, kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--expression", default=TYPICAL)
    args = parser.parse_args()

    start = time.perf_counter()
    sql = sql92.parse(args.expression)
    parse_ms = (time.perf_counter() - start) * 1000
    batch = messages(args.messages)
    decoded = [{k: v.decode() for k, v in props.items()} for props in batch]
    tags = TagFilter.parse("TagA||TagB")

    table = Table(f"SQL92 filter over {args.messages:,} messages; parse {parse_ms:.2f} ms")
    runs: list[tuple[str, Callable[[dict[str, bytes]], bool], Sequence[dict[str, bytes]]]] = [
        ("SQL92, header bytes (as the consumers run it)", lambda p: admits(sql, p), batch),
        ("SQL92, text already decoded", sql.matches, decoded),  # type: ignore[list-item]
        ("tag filter TagA||TagB", lambda p: admits(tags, p), batch),
    ]
    for name, check, data in runs:
        seconds, kept = timed(check, data)
        table.add(name, f"{rate(len(data), seconds):,.0f}", f"{kept:,}", f"{seconds:.3f}")
    table.print(("filter", "msgs/s", "kept", "seconds"))
    print(f"expression: {args.expression}")


if __name__ == "__main__":
    main()
