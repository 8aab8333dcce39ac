"""Transaction handles and the born time every send of one message shares."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapter.proxy.codes import Code, ProxyError
from adapter.proxy.handles import ID_EPOCH_S, TransactionHandle, id_time_ms, stable_born_ms

pytestmark = pytest.mark.timeout(30)

# Made by the 5.x clients' codec at 2026-11-25T19:46:54Z (seconds field 0x0B18D4EE).
MESSAGE_ID = "0102FC000000012F2E0B18D4EE00000008"
MADE_MS = (ID_EPOCH_S + 0x0B18D4EE) * 1000


@given(st.integers(0, 10**6), st.integers(0, 2**62), st.integers(0, 10**6))
def test_a_handle_reads_back_as_written(partition: int, offset: int, checks: int) -> None:
    handle = TransactionHandle(partition, offset, checks)
    assert TransactionHandle.decode(handle.encode()) == handle


@pytest.mark.parametrize("text", ["", "1", "a:b", "1:2:3:4", "-1:2", "0102FC0000"])
def test_a_handle_this_proxy_did_not_hand_out_is_an_invalid_transaction_id(text: str) -> None:
    with pytest.raises(ProxyError) as caught:
        TransactionHandle.decode(text)
    assert caught.value.code == Code.INVALID_TRANSACTION_ID


def test_a_5x_message_id_tells_the_second_it_was_made() -> None:
    assert id_time_ms(MESSAGE_ID) == MADE_MS
    assert id_time_ms("not-an-id") is None
    assert id_time_ms("02" + MESSAGE_ID[2:]) is None


@pytest.mark.parametrize("later_ms", [0, 400, 2_500, 9_000])
def test_every_send_of_one_message_gets_the_same_born_time(later_ms: int) -> None:
    assert stable_born_ms(MESSAGE_ID, MADE_MS + later_ms) == MADE_MS


@pytest.mark.parametrize("now_ms", [MADE_MS + 60_000, MADE_MS - 5_000])
def test_an_id_far_from_now_leaves_the_born_time_to_the_proxy_s_clock(now_ms: int) -> None:
    assert stable_born_ms(MESSAGE_ID, now_ms) == now_ms
