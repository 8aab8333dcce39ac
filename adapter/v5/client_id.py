"""The id a 5.x client gives itself, as rocketmq-python-client's ``ClientIdEncoder`` builds it.

Every 5.x client (producer, SimpleConsumer, PushConsumer) has one; it names the instance in
logs and in a proxy's session, and it must differ between the clients of one process.

Known gaps: none.
"""

from __future__ import annotations

import itertools
import os
import socket
import time

_INDEX = itertools.count()


def new_client_id() -> str:
    """A 5.x client id: ``host@pid@index@time`` (base 36 nanoseconds)."""
    now, digits = time.time_ns(), []
    while now:
        now, digit = divmod(now, 36)
        digits.append("0123456789abcdefghijklmnopqrstuvwxyz"[digit])
    stamp = "".join(reversed(digits)) or "0"
    return f"{socket.gethostname()}@{os.getpid()}@{next(_INDEX)}@{stamp}"
