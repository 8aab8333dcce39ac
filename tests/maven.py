"""A Maven repository on 127.0.0.1 holding the pinned jars the suite already fetched (``make
jars``), for tests of the first-use fetch that must not depend on Maven Central's speed."""

from __future__ import annotations

import contextlib
import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

from adapter import jars


@contextlib.contextmanager
def serve(root: Path) -> Iterator[str]:
    """``root`` served over HTTP on 127.0.0.1 on a thread; its URL."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *_: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, name="maven", daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def mirror(lock: jars.Lock, fetched: Path, root: Path) -> Iterator[str]:
    """A repository in Maven's layout under ``root`` whose jars are those of ``lock`` found in
    ``fetched`` (linked, not copied), served on 127.0.0.1; its URL."""
    for artifact in lock.artifacts:
        path = root / artifact.url("").lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to((fetched / artifact.file_name).resolve())
    with serve(root) as url:
        yield url
