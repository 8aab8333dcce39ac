"""Three minutes of mixed faults (``make chaos``'s schedule, short): nothing acknowledged is
lost, nothing is delivered twice, rolled back, early or out of its FIFO order, and no worker
dies by itself. The report and the lateness chart are written under ``bench/.out/chaos``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.run import run
from tests.cluster import KafkaCluster

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]

OUT = Path(__file__).resolve().parents[3] / "bench" / ".out" / "chaos-smoke"


def test_three_minutes_of_mixed_faults_lose_double_and_reorder_nothing(
    cluster: KafkaCluster,
) -> None:
    outcome = run(cluster, [("mixed", 3.0)], OUT, seed=2026)
    assert outcome.verdict.acknowledged > 1000, "the workload ran through the faults"
    assert len(outcome.verdict.recoveries) >= 5, "faults were injected"
    assert outcome.ok, outcome.report
