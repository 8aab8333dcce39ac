from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapter.producer.routing import java_string_hash, queue_for_sharding_key

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("order-1", -1207111310),
        ("polygenelubricants", -2147483648),
        ("中文", 646394),
        ("😀", 1772899),
    ],
)
def test_the_hash_is_javas_string_hash_code_as_java_17_computes_it(
    text: str, expected: int
) -> None:
    assert java_string_hash(text) == expected


def test_the_queue_is_the_absolute_remainder_as_in_select_message_queue_by_hash() -> None:
    # Java: value = hashCode % size; if (value < 0) value = Math.abs(value)
    assert queue_for_sharding_key("hello", 4) == 99162322 % 4
    assert queue_for_sharding_key("order-1", 4) == abs(-1207111310) % 4
    assert queue_for_sharding_key("polygenelubricants", 3) == 2147483648 % 3


@given(st.text(max_size=30), st.integers(min_value=1, max_value=64))
def test_a_key_always_maps_to_the_same_valid_queue(key: str, queues: int) -> None:
    queue = queue_for_sharding_key(key, queues)
    assert 0 <= queue < queues
    assert queue == queue_for_sharding_key(key, queues)


def test_zero_queues_is_an_error() -> None:
    with pytest.raises(ValueError, match="positive"):
        queue_for_sharding_key("k", 0)
