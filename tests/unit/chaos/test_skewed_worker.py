"""The clock-skew fault's worker reads its wall clock off by what its file says."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapter.clock import SystemClock
from tests.chaos.skewed_worker import REREAD_S, skew_from

pytestmark = pytest.mark.timeout(10)


@pytest.fixture
def restored_clock() -> Iterator[None]:
    wall = SystemClock.now_ms
    yield
    SystemClock.now_ms = wall  # type: ignore[method-assign]


@pytest.mark.usefixtures("restored_clock")
def test_the_wall_clock_follows_the_skew_file_and_the_monotonic_clock_does_not(
    tmp_path: Path,
) -> None:
    skew = tmp_path / "skew"
    skew_from(skew)
    clock = SystemClock()
    assert abs(clock.now_ms() - time.time() * 1000) < 100, "no file: no skew"

    skew.write_text("-7000")
    time.sleep(REREAD_S)
    assert abs(clock.now_ms() - time.time() * 1000 + 7000) < 100
    assert abs(clock.monotonic() - time.monotonic()) < 0.1

    skew.write_text("0")
    time.sleep(REREAD_S)
    assert abs(clock.now_ms() - time.time() * 1000) < 100, "healed"
