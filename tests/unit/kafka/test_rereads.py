"""Records delivered again: one warning per partition and turn, naming the first offset."""

from __future__ import annotations

import logging

import pytest

from adapter.kafka.rereads import Rereads

pytestmark = pytest.mark.timeout(30)


def test_records_delivered_again_are_reported_once_per_partition_then_forgotten(caplog) -> None:
    log = logging.getLogger("test.rereads")
    rereads = Rereads(log)
    for offset in (7, 5, 6):
        rereads.note("HALF partition 0", offset)
    rereads.note("END partition 0", 3)
    with caplog.at_level(logging.WARNING, logger="test.rereads"):
        rereads.report()
        rereads.report()
    assert [r.getMessage() for r in caplog.records] == [
        "the consumer delivered 1 records of END partition 0 again, from offset 3 (its position "
        "went back); they were read before and are skipped",
        "the consumer delivered 3 records of HALF partition 0 again, from offset 5 (its position "
        "went back); they were read before and are skipped",
    ]
