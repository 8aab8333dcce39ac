"""The forwarder's back-off for a real topic that refuses deliveries."""

from __future__ import annotations

import pytest

from adapter.schedule.forwarder import backoff_s

pytestmark = pytest.mark.timeout(30)


def test_refused_deliveries_back_off_exponentially_up_to_thirty_seconds() -> None:
    waits = [backoff_s(n) for n in (1, 2, 3, 4, 20)]
    assert waits[0] < waits[1] < waits[2] < waits[3]
    assert 30 <= waits[4] <= 30.1
