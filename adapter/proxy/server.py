"""``ProxyServer``: one ``rmq-adapter proxy`` process, from start to a clean stop.

Not a RocketMQ behaviour by itself: it plays the part of RocketMQ's proxy process
(``ProxyStartup``), and runs like the adapter's workers (``run()`` until ``stop()``, with
``alive()`` and ``ready()`` for ``/healthz`` and ``/readyz``), so the command line runs it
with their metrics endpoint and signal handling (:mod:`adapter.ops.workers`).

Start: the send core (one Kafka producer for every client's messages), the gRPC server on two
Unix sockets in a private directory (plaintext, and TLS with the given or a self-signed
certificate), then the listening port (:mod:`adapter.proxy.front`). With ``--plaintext`` gRPC
listens on the port itself, plaintext only: no front copies the bytes, and every call is
cheaper. ``ready()`` once serving
and Kafka answered in the last minute.

Stop, in this order: no new connection is taken; gRPC refuses new calls; the Telemetry streams
end (clients reconnect elsewhere); calls in flight get up to half the stop timeout to finish;
the remaining connections are cut; the transactional producers stop (a running check ends,
open fast-path groups commit, END records go out); the send core delivers what it holds.

Known gaps: none.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
from confluent_kafka import KafkaException
from prometheus_client import CollectorRegistry

from adapter.clock import SYSTEM_CLOCK, Clock
from adapter.config import delay_levels_from_env, fast_commit_from_env
from adapter.producer.config import ProducerConfig
from adapter.producer.sender import Sender
from adapter.proxy import tls
from adapter.proxy.auth import Authenticator
from adapter.proxy.config import Address, ProxyConfig
from adapter.proxy.front import Front
from adapter.proxy.metrics import ProxyMetrics
from adapter.proxy.peers import Peers
from adapter.proxy.receives import Receives
from adapter.proxy.routes import Routes
from adapter.proxy.sends import Sends
from adapter.proxy.service import MessagingService, rpc_handler
from adapter.proxy.sessions import Sessions
from adapter.proxy.telemetry import Telemetry
from adapter.proxy.transactions import Transactions

__all__ = ["ProxyServer"]

log = logging.getLogger(__name__)

KAFKA_CHECK_S = 10.0
PROBE_TIMEOUT_S = 2.0  # a probe in flight is also what a stop waits for at most
READY_WITHIN_S = 60.0
IDLE_CHECK_S = 30.0
SEND_LINGER_MS = 1
"""The proxy's Kafka producer waits 1 ms for more records, not the senders' 5: its clients
mostly send and wait, and with one request in flight per broker records queue up behind it
anyway (bench.rocketmq's 8-thread sync sends: 902/s at 5 ms, 1,386-1,999/s at 1 ms;
BENCHMARKS.md, 2026-11-26)."""

WORKERS = 64
POLLS = 64
"""Threads for ReceiveMessage's long polls, apart from the sends' WORKERS."""
"""Threads for blocking work (sends waiting for Kafka, transactional starts)."""
_MESSAGE_LIMIT = 64 * 1024 * 1024
"""The largest gRPC message taken: a batch of bodies at the limit; over it, gRPC refuses."""


class ProxyServer:
    """``run()`` serves until ``stop()``; ``address`` is where, once ``serving`` is set."""

    name = "proxy"

    def __init__(
        self,
        config: ProxyConfig,
        registry: CollectorRegistry | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.config = config
        self.registry = registry or CollectorRegistry()
        self.clock = clock
        self.sessions = Sessions()
        self.metrics = ProxyMetrics(self.registry, lambda: float(len(self.sessions)))
        self.serving = threading.Event()
        self.address: Address | None = None
        self._stop_requested = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._last_tick: float | None = None
        self._kafka_ok_at: float | None = None

    # -- what the command line calls ----------------------------------------------------------

    def run(self, *, burst: bool = False) -> None:
        """Serve until :meth:`stop` (``burst`` is accepted for the workers' runner and ignored:
        a proxy is never idle by itself)."""
        self._stopped.clear()
        try:
            asyncio.run(self._main())
        finally:
            self.serving.clear()
            self._stopped.set()

    def stop(self, timeout: float | None = None) -> bool:
        """Ask :meth:`run` to stop (any thread); whether it ended within ``timeout``."""
        self._stop_requested.set()
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop has ended already
                loop.call_soon_threadsafe(wake.set)
        if timeout is None:
            return self._stopped.is_set()
        return self._stopped.wait(timeout)

    def alive(self, within_s: float) -> bool:
        last = self._last_tick
        return last is not None and time.monotonic() - last <= within_s

    def ready(self) -> bool:
        ok_at = self._kafka_ok_at
        fresh = ok_at is not None and time.monotonic() - ok_at <= READY_WITHIN_S
        return self.serving.is_set() and fresh

    # -- the event loop -----------------------------------------------------------------------

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        if self._stop_requested.is_set():
            return
        config = self.config
        auth = Authenticator.load(config.users_file)
        executor = ThreadPoolExecutor(WORKERS, thread_name_prefix="proxy")
        sender = await self._loop.run_in_executor(executor, self._sender)
        transactions = Transactions(config, self.sessions, self.metrics, self.clock)
        sends = Sends(config, sender, transactions, self.metrics, executor)
        telemetry = Telemetry(
            self.sessions,
            max_body_size=config.max_body_size,
            on_publishing=lambda topics: self._announced(topics, transactions, executor),
            fifo_groups=config.fifo_groups,
        )
        peers = Peers(config.peer_advertise or config.peer_listen, config.peer_networks)
        receives = Receives(config, peers, self.clock)
        polls = ThreadPoolExecutor(POLLS, thread_name_prefix="proxy-poll")
        servicer = MessagingService(
            auth=auth,
            metrics=self.metrics,
            routes=Routes(config, sender.topics, self.sessions, sender.bands.of),
            sends=sends,
            transactions=transactions,
            telemetry=telemetry,
            receives=receives,
            executor=executor,
            polls=polls,
            bound=lambda: self.address or config.listen,
        )
        with tempfile.TemporaryDirectory(prefix="rmq-proxy-") as private:
            server = grpc.aio.server(
                options=[
                    ("grpc.max_receive_message_length", _MESSAGE_LIMIT),
                    ("grpc.max_send_message_length", _MESSAGE_LIMIT),
                    ("grpc.so_reuseport", int(config.plaintext and config.reuse_port)),
                ]
            )
            server.add_generic_rpc_handlers((rpc_handler(servicer),))
            front: Front | None = None
            try:
                if config.plaintext:
                    self.address = _bind(server, config.listen)
                else:
                    plain = str(Path(private) / "plain.sock")
                    server.add_insecure_port(f"unix:{plain}")
                    secure = str(Path(private) / "tls.sock")
                    server.add_secure_port(f"unix:{secure}", tls.server_credentials(config))
                    front = Front(config.listen, plain, secure, reuse_port=config.reuse_port)
                peers.me = config.peer_advertise or _bind(server, config.peer_listen)
                await server.start()
                if front is not None:
                    self.address = front.start()
            except OSError:
                await server.stop(None)
                await self._loop.run_in_executor(executor, self._close, transactions, sender)
                executor.shutdown(wait=False)
                raise
            self.serving.set()
            self.metrics.serving(str(self.address))
            log.info(
                "proxy serving RocketMQ 5.x gRPC (%s) on %s, Kafka at %s; %s",
                "plaintext only" if front is None else "TLS and plaintext",
                self.address,
                config.kafka.bootstrap_servers,
                f"auth on ({auth.account_count} access keys)"
                if auth.enabled
                else "auth off (no users file): every request is allowed",
            )
            ticking = asyncio.create_task(self._tick(sender, transactions, executor))
            await self._wake.wait()
            log.info("proxy stopping: no new connections, calls in flight finish")
            ticking.cancel()  # no new probe of Kafka; one in flight ends within its timeout
            self.serving.clear()
            if front is not None:
                front.stop_accepting()
            stopping = asyncio.create_task(server.stop(config.stop_timeout_s / 2))
            await asyncio.sleep(0)  # new calls are refused from here on
            self.sessions.end_all()
            await stopping
            if front is not None:
                front.close_all()
            await self._loop.run_in_executor(executor, self._close, transactions, sender)
            await self._loop.run_in_executor(executor, receives.close)
            peers.close()
        # the work still on the pools (a probe, a poll) ends before the last line: nothing is
        # logged after it and the process exits with it (the runner bounds the whole stop)
        await self._loop.run_in_executor(None, _drain, executor, polls)
        log.info("proxy stopped")

    def _sender(self) -> Sender:
        config = self.config
        producer = ProducerConfig(
            config.kafka,
            "rmq-proxy",
            f"proxy-{config.instance_id}",
            send_timeout_ms=config.send_timeout_ms,
            max_message_size=config.max_body_size,
            delay_levels=delay_levels_from_env(),
            fast_commit=fast_commit_from_env(),
        )
        linger = {"linger.ms": SEND_LINGER_MS}  # RMQ_ADAPTER_KAFKA_LINGER_MS still wins
        return Sender(producer, reports_served=True, settings=linger, clock=self.clock)

    def _announced(self, topics: Any, transactions: Transactions, executor: Any) -> None:
        """A producer listed ``topics``: start those declared TRANSACTION (in the background)."""
        for topic in topics:
            if "TRANSACTION" in self.config.topic_types.get(topic, ()):
                executor.submit(_quietly, transactions.producer, topic)

    async def _tick(self, sender: Sender, transactions: Transactions, executor: Any) -> None:
        loop = asyncio.get_running_loop()
        last_kafka = last_idle = -1e9
        while True:
            now = time.monotonic()
            self._last_tick = now
            if now - last_kafka >= KAFKA_CHECK_S:
                last_kafka = now
                if await loop.run_in_executor(executor, _reaches, sender, self._stop_requested):
                    self._kafka_ok_at = time.monotonic()
            if now - last_idle >= IDLE_CHECK_S:
                last_idle = now
                await loop.run_in_executor(executor, _quietly, transactions.close_unserved)
            await asyncio.sleep(1.0)

    @staticmethod
    def _close(transactions: Transactions, sender: Sender) -> None:
        transactions.close()
        remaining = sender.close()
        if remaining:
            log.error("proxy stopped with %d messages not acknowledged by Kafka", remaining)


def _reaches(sender: Sender, stopping: threading.Event) -> bool:
    """Whether Kafka answers a metadata request within ``PROBE_TIMEOUT_S``; a warning if not,
    unless the proxy is stopping by then (an outage is no news to whoever stops it)."""
    try:
        sender.client.list_topics(timeout=PROBE_TIMEOUT_S)
    except KafkaException as exc:
        if not stopping.is_set():
            log.warning("Kafka at %s does not answer: %s", sender.address, exc)
        return False
    return True


def _drain(*pools: ThreadPoolExecutor) -> None:
    for pool in pools:
        pool.shutdown(wait=True)


def _bind(server: Any, address: Address) -> Address:
    """Add a plaintext port to ``server``: the address bound (``OSError`` if taken)."""
    try:
        port = server.add_insecure_port(str(address))
    except RuntimeError as exc:  # grpcio raises this when the port cannot be bound
        raise OSError(f"cannot listen on {address}: {exc}") from exc
    if not port:
        raise OSError(f"cannot listen on {address}")
    return Address(address.host, port)


def _quietly(call: Any, *args: Any) -> Any:
    try:
        return call(*args)
    except Exception:
        log.exception("proxy background work failed")
        return None
