"""The jar locks against what Maven resolves for the poms (``make jars``, which the suite runs)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from adapter import jars
from adapter.ops import broker
from adapter.spark import jars as spark_jars
from tests.brokers import ROOT

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    ("lock", "fetched"),
    [
        (broker.jar_lock, ROOT / "infra" / ".jars" / "kafka"),
        (spark_jars.jar_lock, ROOT / "infra" / ".jars" / "spark"),
    ],
)
def test_each_lock_pins_exactly_the_jars_maven_resolves_for_its_pom(
    lock: Callable[[], jars.Lock], fetched: Path
) -> None:
    pinned = {a.file_name: (a.size, a.sha256) for a in lock().artifacts}
    found = {p.name: (p.stat().st_size, jars.sha256_of(p)) for p in fetched.glob("*.jar")}
    assert pinned == found, "run infra/lock-jars.py after changing a pom (see its docstring)"
