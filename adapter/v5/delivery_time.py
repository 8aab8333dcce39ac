"""A 5.x ``delivery_timestamp`` as epoch milliseconds: the one rule for seconds and ms.

The 5.x client sends seconds (``int(time.time()) + 10`` in its examples) and the Java client
milliseconds; a value under :data:`SECONDS_BELOW` is read as seconds, the rest as
milliseconds, and a fraction is rounded up, so a timer is never early.
"""

from __future__ import annotations

import math
import numbers

from adapter.v5.exception import IllegalArgumentException

__all__ = ["MILLISECONDS_BELOW", "SECONDS_BELOW", "epoch_ms"]

SECONDS_BELOW = 10**11
"""A ``delivery_timestamp`` under this is in seconds (year 5138 in seconds, 1973 in ms)."""
MILLISECONDS_BELOW = 10**14
"""A ``delivery_timestamp`` from this up is in micro- or nanoseconds (year 5138 in ms)."""


def epoch_ms(delivery_timestamp: object) -> int:
    """A ``delivery_timestamp`` as whole epoch milliseconds: seconds under
    :data:`SECONDS_BELOW`, milliseconds above, a fraction rounded up (never early);
    ``IllegalArgumentException`` for anything that is not a positive time in s or ms."""
    what = f"delivery_timestamp {delivery_timestamp!r}"
    if isinstance(delivery_timestamp, bool) or not isinstance(delivery_timestamp, numbers.Real):
        raise IllegalArgumentException(
            f"{what} must be a number (epoch seconds or milliseconds), not a bool or "
            f"{type(delivery_timestamp).__name__}"
        )
    exact = isinstance(delivery_timestamp, numbers.Integral)
    number: float | int
    if isinstance(delivery_timestamp, numbers.Integral):
        number = int(delivery_timestamp)
    else:
        number = float(delivery_timestamp)
    if not math.isfinite(number):
        raise IllegalArgumentException(f"{what} must be finite")
    if number <= 0:
        raise IllegalArgumentException(f"{what} must be positive (epoch seconds or ms)")
    if number >= MILLISECONDS_BELOW:
        raise IllegalArgumentException(
            f"{what} looks like microseconds or nanoseconds; give epoch ms (or seconds)"
        )
    scale = 1000 if number < SECONDS_BELOW else 1
    return int(number) * scale if exact else math.ceil(number * scale)
