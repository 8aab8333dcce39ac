"""The console's HTTP server: the standard library's WSGI server, a thread per connection.

Not a RocketMQ behaviour. It reuses the workers' bounded server (:class:`~adapter.ops.workers.
ProbeServer`: at most :data:`LIMITS` connections at once, an idle one closed), runs until
SIGTERM or Ctrl-C, and prints its address once it listens (with port 0, the port it got).

Known gaps: HTTP/1.0-style connections (no keep-alive); no TLS.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable

from adapter.console.app import ConsoleApp
from adapter.console.config import ConsoleConfig
from adapter.exceptions import AdapterError
from adapter.ops.workers import ProbeLimits, ProbeServer

log = logging.getLogger(__name__)

LIMITS = ProbeLimits(connections=16, idle_s=30.0)


class _ServerV6(ProbeServer):
    address_family = socket.AF_INET6


def bind(config: ConsoleConfig) -> ProbeServer:
    """The server for ``config``, listening; :class:`AdapterError` if the address is taken."""
    kind = _ServerV6 if ":" in config.host else ProbeServer
    try:
        server = kind((config.host, config.port), LIMITS)
    except OSError as exc:
        raise AdapterError(
            f"the console cannot listen on {config.host}:{config.port} "
            f"({exc.strerror or exc}): choose another --listen"
        ) from None
    server.set_app(ConsoleApp(config))
    return server


def address(server: ProbeServer) -> str:
    host, port = str(server.server_address[0]), server.server_address[1]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def serve(
    config: ConsoleConfig,
    install_signals: Callable[[Callable[[], None]], None],
    announce: Callable[[str], None],
) -> None:
    """Serve until a signal ``install_signals`` wires calls its stop."""
    server = bind(config)
    stopping = threading.Event()
    install_signals(stopping.set)
    thread = threading.Thread(target=server.serve_forever, name="console", daemon=True)
    thread.start()
    announce(f"console on {address(server)}")
    try:
        while not stopping.wait(1.0):
            pass
    finally:
        server.shutdown()
        server.server_close()
        log.info("console stopped")
