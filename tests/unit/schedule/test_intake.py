"""Reading one SCHEDULE record: its due time from the broker's stamp or a timer's hop, and the
reason it is parked when its headers are not the adapter's."""

from __future__ import annotations

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME
from hypothesis import example, given
from hypothesis import strategies as st

from adapter import properties as prop
from adapter.delay import DelayLevels
from adapter.hops import HopTable
from adapter.schedule import timer
from adapter.schedule.aside import SINCE_HEADER
from adapter.schedule.due import TRUSTED_AHEAD_MS
from adapter.schedule.grants import ScheduleGrants
from adapter.schedule.intake import FAR_AHEAD_MS, read_record
from adapter.schedule.plan import hop_headers
from adapter.schedule.signing import ScheduleSigner

pytestmark = pytest.mark.timeout(60)

HOPS = HopTable.of(DelayLevels.parse())
NOW = 1_700_000_000_000
LEVEL_2 = 1  # partition of level 2 (5 s)
FINE = 18  # the first fine hop


def stamped(ms: int) -> tuple[int, int]:
    return (TIMESTAMP_LOG_APPEND_TIME, ms)


def test_a_level_record_is_due_at_its_store_time_plus_the_level_delay() -> None:
    read = read_record(LEVEL_2, [], b"v", stamped(NOW - 1_000), NOW, HOPS)
    assert (read.due_ms, read.reason, read.ahead_ms) == (NOW + 4_000, None, 0)


def test_a_store_time_ahead_of_the_forwarders_clock_is_measured_and_counts_from_the_stamp() -> None:
    read = read_record(LEVEL_2, [], b"v", stamped(NOW + 300_000), NOW, HOPS)
    assert (read.due_ms, read.ahead_ms) == (NOW + 305_000, 300_000)


def test_a_record_stamped_by_its_writer_counts_its_delay_from_the_read() -> None:
    # A SCHEDULE topic made by hand with CreateTime: the writer picks any time, past or future.
    for stamp in (0, NOW - 3_600_000, NOW + 3_600_000):
        read = read_record(LEVEL_2, [], b"v", (TIMESTAMP_CREATE_TIME, stamp), NOW, HOPS)
        assert (read.due_ms, read.reason) == (NOW + 5_000, None)


def test_a_timer_is_due_at_the_end_of_its_hop_capped_at_the_hops_delay() -> None:
    headers = hop_headers("T1", NOW + 10_000, NOW + 40)
    read = read_record(FINE, headers, b"v", stamped(NOW), NOW, HOPS)
    assert (read.due_ms, read.item.message_id, read.item.deliver_ms) == (
        NOW + 40,
        "T1",
        NOW + 10_000,
    )
    far = hop_headers("T1", NOW + 10_000, NOW + 10**12)
    assert read_record(FINE, far, b"v", stamped(NOW), NOW, HOPS).due_ms == NOW + 50


@pytest.mark.parametrize(
    ("headers", "why"),
    [
        ([(timer.DELIVER_HEADER, None)], "TIMER_DELIVER_MS is null"),
        (
            [(timer.DELIVER_HEADER, b"1"), (timer.HOP_DUE_HEADER, None), (prop.UNIQ_KEY, b"T")],
            "rmq.hop_due is null",
        ),
        (
            [(timer.DELIVER_HEADER, b"1"), (timer.HOP_DUE_HEADER, b"2"), (prop.UNIQ_KEY, None)],
            "UNIQ_KEY is null",
        ),
        ([(timer.DELIVER_HEADER, b"soon"), (timer.HOP_DUE_HEADER, b"2")], "not a time in ms"),
        ([(timer.DELIVER_HEADER, b"1"), (prop.UNIQ_KEY, b"T")], "rmq.hop_due missing"),
        (
            [(timer.DELIVER_HEADER, b"1"), (timer.HOP_DUE_HEADER, b"2"), (prop.UNIQ_KEY, b"\xff")],
            "UNIQ_KEY is not UTF-8",
        ),
        (
            [(timer.DELIVER_HEADER, b"1"), (timer.DELIVER_HEADER, b"2"), (prop.UNIQ_KEY, b"T")],
            "TIMER_DELIVER_MS given twice",
        ),
        ([(timer.DELIVER_HEADER, b"9" * 40), (timer.HOP_DUE_HEADER, b"2")], "not a time in ms"),
    ],
)
def test_a_timer_whose_headers_are_not_the_adapters_is_parked_at_once_with_the_reason(
    headers: list[tuple[str, bytes | None]], why: str
) -> None:
    read = read_record(FINE, headers, b"v", stamped(NOW), NOW, HOPS)
    assert read.due_ms == NOW
    assert read.reason is not None
    assert read.reason.startswith("corrupt: timer headers")
    assert why in read.reason


def test_a_timer_dated_absurdly_far_ahead_is_parked_instead_of_hopping_for_ever() -> None:
    headers = hop_headers("T1", NOW + FAR_AHEAD_MS + 1, NOW + 40)
    read = read_record(FINE, headers, b"v", stamped(NOW), NOW, HOPS)
    assert read.reason is not None
    assert "days ahead" in read.reason
    just_in = hop_headers("T1", NOW + timer.MAX_TIMER_MS, NOW + 40)
    assert read_record(FINE, just_in, b"v", stamped(NOW), NOW, HOPS).reason is None


header_values = st.one_of(
    st.none(),
    st.binary(max_size=24),
    st.integers(min_value=-(10**20), max_value=10**20).map(lambda n: str(n).encode()),
)
header_names = st.sampled_from(
    [timer.DELIVER_HEADER, timer.HOP_DUE_HEADER, prop.UNIQ_KEY, prop.DELAY, "x"]
)


@given(
    headers=st.lists(st.tuples(header_names, header_values), max_size=6),
    partition=st.integers(min_value=0, max_value=HOPS.partitions - 1),
    kind=st.sampled_from([TIMESTAMP_LOG_APPEND_TIME, TIMESTAMP_CREATE_TIME, 0]),
    stamp=st.integers(min_value=-(2**63), max_value=2**63 - 1),
)
@example(headers=[], partition=0, kind=TIMESTAMP_LOG_APPEND_TIME, stamp=NOW + 7_199_001)
@example(headers=[], partition=0, kind=TIMESTAMP_LOG_APPEND_TIME, stamp=NOW + 1)
@example(headers=[], partition=17, kind=TIMESTAMP_LOG_APPEND_TIME, stamp=2**63 - 1)
def test_any_headers_and_stamp_are_read_or_given_a_reason_never_an_exception(
    headers: list[tuple[str, bytes | None]], partition: int, kind: int, stamp: int
) -> None:
    read = read_record(partition, headers, b"v", (kind, stamp), NOW, HOPS)
    assert read.due_ms <= NOW + TRUSTED_AHEAD_MS + HOPS.longest_ms, "never held for ever"
    if not {name for name, _ in headers} & {timer.DELIVER_HEADER, timer.HOP_DUE_HEADER}:
        store = stamp if kind == TIMESTAMP_LOG_APPEND_TIME else NOW
        trusted = min(store, NOW + TRUSTED_AHEAD_MS)
        assert (read.due_ms, read.reason) == (trusted + HOPS.delay_ms(partition), None)


def test_a_record_set_aside_for_its_missing_topic_is_due_at_its_hops_end_and_knows_since_when() -> (
    None
):
    headers = [(timer.HOP_DUE_HEADER, str(NOW + 100).encode()), (SINCE_HEADER, b"12345")]
    read = read_record(FINE + 1, headers, b"v", stamped(NOW), NOW, HOPS)
    assert (read.due_ms, read.item.missing_since_ms, read.reason) == (NOW + 100, 12345, None)
    garbage = [(timer.HOP_DUE_HEADER, b"soon"), (SINCE_HEADER, None)]
    read = read_record(LEVEL_2, garbage, b"v", stamped(NOW), NOW, HOPS)
    assert (read.due_ms, read.item.missing_since_ms) == (NOW + 5_000, None), "as a level record"


def test_with_grants_a_record_not_signed_by_a_granted_application_is_parked_at_once() -> None:
    grants = ScheduleGrants.parse(
        '{"applications": {"orders": {"key": "' + "k" * 32 + '", "topics": ["Orders"]}}}', "g"
    )
    unsigned = read_record(LEVEL_2, [], b"v", stamped(NOW), NOW, HOPS, grants)
    assert unsigned.due_ms == NOW
    assert (unsigned.reason or "").startswith("refused destination: unsigned")
    signer = ScheduleSigner("orders", b"k" * 32)
    signed = read_record(LEVEL_2, list(signer.headers(b"v")), b"v", stamped(NOW), NOW, HOPS, grants)
    assert (signed.reason, signed.item.signer, signed.due_ms) == (None, "orders", NOW + 5_000)
    assert signed.item.signed == signer.headers(b"v"), "carried to the record's hops"
    without = read_record(LEVEL_2, list(signer.headers(b"v")), b"v", stamped(NOW), NOW, HOPS)
    assert (without.item.signer, without.item.signed) == (None, signer.headers(b"v"))
