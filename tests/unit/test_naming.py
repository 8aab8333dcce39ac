from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapter import naming
from adapter.exceptions import InvalidNameError

pytestmark = pytest.mark.timeout(60)

rocketmq_names = st.text(alphabet="%|abcXYZ019_-", min_size=1, max_size=80)


@given(rocketmq_names)
def test_encoding_is_reversible_for_every_rocketmq_name(name: str) -> None:
    assert naming.decode(naming.encode(name)) == name


@given(rocketmq_names)
def test_encoded_names_hold_only_kafka_legal_characters(name: str) -> None:
    encoded = naming.encode(name)
    assert all(c.isascii() and (c.isalnum() or c in "._-") for c in encoded)


def test_percent_and_bar_are_escaped_with_their_hex_codes() -> None:
    assert naming.encode("%RETRY%GID_order") == ".25RETRY.25GID_order"
    assert naming.encode("a|b") == "a.7Cb"
    assert naming.decode(".25DLQ.25g") == "%DLQ%g"


def test_system_topic_names_are_kept_as_rocketmq_spells_them() -> None:
    assert naming.kafka_topic(naming.SCHEDULE_TOPIC) == "SCHEDULE_TOPIC_XXXX"
    assert naming.kafka_topic(naming.TRANS_HALF_TOPIC) == "RMQ_SYS_TRANS_HALF_TOPIC"
    assert naming.TRANS_CHECK_MAX_TIME_TOPIC == "TRANS_CHECK_MAX_TIME_TOPIC"


def test_retry_dead_letter_and_check_topics_derive_from_the_group_and_back() -> None:
    assert naming.retry_topic("G1") == "%RETRY%G1"
    assert naming.dlq_topic("G1") == "%DLQ%G1"
    assert naming.check_topic("G1") == "%CHECK%G1"
    for topic in ("%RETRY%G1", "%DLQ%G1", "%CHECK%G1"):
        assert naming.group_of(topic) == "G1"
    assert naming.group_of("TopicTest") is None
    assert naming.is_retry_topic("%RETRY%G1")


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("", "blank"),
        ("   ", "blank"),
        ("has space", "illegal characters"),
        ("dot.ted", "illegal characters"),
        ("x" * 128, "max length 127"),
    ],
)
def test_invalid_topic_names_are_refused_with_the_rule_they_break(name: str, reason: str) -> None:
    with pytest.raises(InvalidNameError, match=reason):
        naming.kafka_topic(name)


def test_a_topic_of_127_characters_is_fine_unless_its_escapes_pass_kafkas_limit() -> None:
    assert naming.kafka_topic("x" * 127) == "x" * 127
    with pytest.raises(InvalidNameError, match="Kafka allows 249"):
        naming.kafka_topic("%" * 100)


def test_producers_may_not_send_to_system_topics() -> None:
    with pytest.raises(InvalidNameError, match="forbidden"):
        naming.sendable_kafka_topic(naming.SCHEDULE_TOPIC)
    assert naming.sendable_kafka_topic("%RETRY%G1") == ".25RETRY.25G1"


def test_group_names_follow_rocketmqs_rules() -> None:
    assert naming.validate_group("GID_order-1") == "GID_order-1"
    with pytest.raises(InvalidNameError, match="max length 255"):
        naming.validate_group("g" * 256)
    with pytest.raises(InvalidNameError, match="illegal characters"):
        naming.validate_group("g/1")


def test_broadcasting_offsets_live_under_the_group_and_instance() -> None:
    assert naming.broadcast_group_id("G1", "DEFAULT") == "G1@DEFAULT"


def test_a_namespace_prefixes_topics_and_groups_as_rocketmq_does() -> None:
    assert naming.with_namespace("shopA", "Orders") == "shopA%Orders"
    assert naming.with_namespace("shopA", "GID_orders") == "shopA%GID_orders"
    assert naming.with_namespace("shopA", "%RETRY%GID_o") == "%RETRY%shopA%GID_o"
    assert naming.with_namespace("shopA", "%DLQ%GID_o") == "%DLQ%shopA%GID_o"
    assert naming.retry_topic(naming.with_namespace("shopA", "GID_o")) == "%RETRY%shopA%GID_o"


def test_no_namespace_a_system_topic_or_a_name_already_in_it_is_left_as_it_is() -> None:
    assert naming.with_namespace("", "Orders") == "Orders"
    assert naming.with_namespace("shopA", naming.SCHEDULE_TOPIC) == naming.SCHEDULE_TOPIC
    assert naming.with_namespace("shopA", "shopA%Orders") == "shopA%Orders"


@given(
    st.text(alphabet="abcXYZ019_-", min_size=1, max_size=64),
    st.text(alphabet="abcXYZ019_-", min_size=1, max_size=60),
    st.sampled_from(["", "%RETRY%", "%DLQ%"]),
)
def test_a_namespaced_name_splits_back_into_its_namespace_and_name(
    namespace: str, name: str, prefix: str
) -> None:
    wrapped = naming.with_namespace(namespace, prefix + name)
    assert naming.split_namespace(wrapped) == (namespace, prefix + name)
    assert naming.split_namespace(prefix + name) == ("", prefix + name)


@pytest.mark.parametrize("namespace", ["a b", "x" * 65, "a%b", "a|b"])
def test_a_namespace_rocketmq_would_refuse_is_refused(namespace: str) -> None:
    with pytest.raises(InvalidNameError, match="namespace"):
        naming.with_namespace(namespace, "Orders")


def test_the_band_of_a_kafka_topic_is_its_priority_suffix_or_0() -> None:
    assert naming.priority_band("Orders.priority-3") == 3
    assert naming.priority_band("Orders") == 0
    assert naming.priority_band("Orders.priority-03") == 0, "not a name a band is given"
