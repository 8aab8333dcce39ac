"""The least a Python gRPC server spends on one call here: the floor under the proxy's figures.

``rmq-adapter proxy`` serves RocketMQ's protocol with grpc.aio, one RPC per message sent or
acknowledged. This benchmark serves one unary method that does nothing (it returns the
request's bytes) with grpc.aio, in a process of its own, and calls it from threads of a
synchronous client with the metadata the official clients put on every call (client id,
language, version, date, request id: about 200 bytes). It prints calls/s and the server's CPU
ms per call, with 1, 4 and 8 client threads: no handler of ours runs, so no proxy built on
Python gRPC can spend less per RPC on this machine.

Run: ``python -m bench.grpc_floor [--seconds S] [--threads 1,4,8]``.
Known gaps: plaintext only (the proxy's front adds its copying on top); the client shares the
machine's cores with the server, as the official clients do in ``bench.rocketmq``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import grpc

from bench.common import LoggedProcess, Table, free_port

METHOD = "/bench.Floor/Echo"
PAYLOAD = b"x" * 100


def _metadata() -> tuple[tuple[str, str], ...]:
    """What the official clients send with each call (no signature: auth is off)."""
    return (
        ("x-mq-client-id", f"bench@{uuid.uuid4().hex[:8]}#1#0"),
        ("x-mq-language", "PYTHON"),
        ("x-mq-protocol", "v2"),
        ("x-mq-client-version", "5.0.0"),
        ("x-mq-date-time", time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())),
        ("x-mq-request-id", str(uuid.uuid4())),
    )


async def _serve(port: int) -> None:
    async def echo(request: bytes, _context: Any) -> bytes:
        return request

    server = grpc.aio.server()
    handler = grpc.unary_unary_rpc_method_handler(echo)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("bench.Floor", {"Echo": handler}),)
    )
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("serving", flush=True)
    await server.wait_for_termination()


def _drive(port: int, threads: int, seconds: float) -> int:
    """Calls made by ``threads`` client threads in ``seconds``."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.unary_unary(METHOD)
        call(PAYLOAD, metadata=_metadata(), timeout=10)  # connected before the clock starts
        counts = [0] * threads
        until = time.monotonic() + seconds

        def run(index: int) -> None:
            while time.monotonic() < until:
                call(PAYLOAD, metadata=_metadata(), timeout=10)
                counts[index] += 1

        workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(seconds + 30)
        return sum(counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--threads", default="1,4,8")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve(args.serve))
        return
    port = free_port()
    log = Path(tempfile.mkdtemp(prefix="grpc-floor-")) / "server.log"
    server = LoggedProcess([sys.executable, "-m", "bench.grpc_floor", "--serve", str(port)], log)
    server.what = "the echo server"
    table = Table("A grpc.aio server that does nothing: calls/s and its CPU per call")
    try:
        server.wait_for(lambda text: "serving" in text, timeout=60)
        for threads in (int(n) for n in args.threads.split(",")):
            before, started = server.cpu_seconds(), time.monotonic()
            calls = _drive(port, threads, args.seconds)
            elapsed = time.monotonic() - started
            cpu_ms = (server.cpu_seconds() - before) * 1000 / max(calls, 1)
            table.add(threads, f"{calls / elapsed:,.0f}", f"{cpu_ms:.3f}")
    finally:
        server.stop()
    table.print(("client threads", "calls/s", "server CPU ms per call"))


if __name__ == "__main__":
    main()
