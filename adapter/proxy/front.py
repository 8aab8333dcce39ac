"""One port for TLS and plaintext clients: the proxy's listening socket.

RocketMQ's proxy takes TLS and plaintext gRPC on one port (8081), and the clients rely on it:
the Java client speaks TLS by default, the Python client plaintext. gRPC's server binds a port
for one or the other, so the proxy listens itself: it peeks at the first byte a client sends
(``0x16`` opens a TLS handshake; HTTP/2 opens with ``PRI``) and joins the connection to the
gRPC server's plaintext or TLS socket (Unix sockets in a private directory), copying bytes both
ways until either side closes. TLS itself is gRPC's (its certificate, ALPN ``h2``).

Each connection costs two threads that copy, with ``TCP_NODELAY`` on the client's socket. A
client that sends nothing within :data:`FIRST_BYTE_S` is closed. With ``reuse_port`` several
proxies bind the same address and the kernel spreads new connections over them.

Known gaps: the gRPC server sees every client as coming from the Unix socket (the front logs
the address of each connection it could not join).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading

from adapter.proxy.config import Address

__all__ = ["FIRST_BYTE_S", "TLS_RECORD", "Front"]

log = logging.getLogger(__name__)

FIRST_BYTE_S = 10.0
TLS_RECORD = 0x16
"""The first byte of a TLS handshake record."""
_CHUNK = 256 * 1024


class Front:
    """The listening socket and the connections it joined to the gRPC server."""

    def __init__(
        self, listen: Address, plain: str, tls: str | None, *, reuse_port: bool = False
    ) -> None:
        self._listen = listen
        self._plain = plain
        self._tls = tls
        self._reuse_port = reuse_port
        self._socket: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self.address: Address | None = None
        self.connections = 0

    def start(self) -> Address:
        """Bind and listen (``OSError`` if the address is taken); the address bound."""
        family = socket.AF_INET6 if ":" in self._listen.host else socket.AF_INET
        server = socket.socket(family, socket.SOCK_STREAM)
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if self._reuse_port:
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        try:
            server.bind((self._listen.host, self._listen.port))
            server.listen(512)
        except OSError:
            server.close()
            raise
        server.settimeout(0.5)
        self._socket = server
        self.address = Address(self._listen.host, server.getsockname()[1])
        accept = threading.Thread(
            target=self._accept, args=(server,), name="proxy-accept", daemon=True
        )
        accept.start()
        return self.address

    def stop_accepting(self) -> None:
        self._closing.set()
        server, self._socket = self._socket, None
        if server is not None:
            server.close()

    def close_all(self) -> None:
        """Cut every connection still open."""
        self.stop_accepting()
        with self._lock:
            open_now = list(self._open)
        for sock in open_now:
            _shut(sock)

    def _accept(self, server: socket.socket) -> None:
        while not self._closing.is_set():
            try:
                client, peer = server.accept()
            except TimeoutError:
                continue
            except OSError:
                if not self._closing.is_set():
                    log.exception("the proxy's listening socket failed")
                return
            self.connections += 1
            threading.Thread(
                target=self._join, args=(client, peer), name="proxy-conn", daemon=True
            ).start()

    def _join(self, client: socket.socket, peer: object) -> None:
        backend: socket.socket | None = None
        try:
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            client.settimeout(FIRST_BYTE_S)
            first = client.recv(1, socket.MSG_PEEK)
            client.settimeout(None)
            if not first:
                return
            path = self._tls if first[0] == TLS_RECORD else self._plain
            if path is None:
                log.info("closed a TLS connection from %s: TLS is not served", peer)
                return
            backend = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            backend.connect(path)
        except OSError as exc:
            log.info("closed a connection from %s: %s", peer, exc)
            _shut(client)
            if backend is not None:
                _shut(backend)
            return
        with self._lock:
            self._open.update((client, backend))
        back = threading.Thread(
            target=self._copy, args=(backend, client), name="proxy-conn-out", daemon=True
        )
        back.start()
        self._copy(client, backend)
        back.join()
        with self._lock:
            self._open.difference_update((client, backend))
        client.close()
        backend.close()

    @staticmethod
    def _copy(source: socket.socket, target: socket.socket) -> None:
        """Bytes from ``source`` to ``target`` until ``source`` ends; then end ``target``'s
        writing side (a failure on either cuts both)."""
        buffer = bytearray(_CHUNK)
        view = memoryview(buffer)
        try:
            while True:
                count = source.recv_into(buffer)
                if not count:
                    break
                target.sendall(view[:count])
            with contextlib.suppress(OSError):
                target.shutdown(socket.SHUT_WR)
        except OSError:
            _shut(source)
            _shut(target)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
