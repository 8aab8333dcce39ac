"""Asking Kafka again: the one retry rule of the plumbing, on tenacity.

A call that fails with an error Kafka calls passing (a group coordinator loading, a topic
created a moment ago, a leader being elected) is made again at a fixed interval, up to a
deadline, and then the last error is raised as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import tenacity

T = TypeVar("T")


def keep_trying(
    call: Callable[[], T],
    *,
    when: Callable[[BaseException], bool],
    every_s: float,
    for_s: float,
) -> T:
    """``call()``, called again every ``every_s`` seconds while it raises an error ``when``
    accepts, for up to ``for_s`` seconds; then that error."""
    return tenacity.Retrying(
        retry=tenacity.retry_if_exception(when),
        wait=tenacity.wait_fixed(every_s),
        stop=tenacity.stop_after_delay(for_s),
        reraise=True,
    )(call)
