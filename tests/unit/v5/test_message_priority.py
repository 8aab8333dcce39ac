"""The 5.x Message's ``priority`` (RIP-80): the setter's rules of 5.x, the PRIORITY type, and
its ``__PRIORITY`` header there and back."""

from __future__ import annotations

import pytest

from adapter import properties as prop
from adapter.v5 import Message
from adapter.v5.exception import IllegalArgumentException
from adapter.v5.message import MessageType
from tests.unit.v5.test_message import MAX, order, received_on

pytestmark = pytest.mark.timeout(30)


def test_a_new_message_has_no_priority_and_one_set_reads_back() -> None:
    message = order()
    assert message.priority is None
    message.priority = 3
    assert message.priority == 3


@pytest.mark.parametrize("priority", [-1, True, 1.5, "3", None])
def test_a_priority_below_0_or_not_a_whole_number_is_refused(priority: object) -> None:
    with pytest.raises(IllegalArgumentException, match="priority"):
        order().priority = priority  # type: ignore[assignment]


@pytest.mark.parametrize(("name", "value"), [("message_group", "g"), ("delivery_timestamp", 9)])
def test_a_priority_above_0_excludes_a_group_or_a_delivery_time_either_way_round(
    name: str, value: object
) -> None:
    set_first = order()
    setattr(set_first, name, value)
    with pytest.raises(IllegalArgumentException, match=f"priority and {name}"):
        set_first.priority = 1
    set_after = order()
    set_after.priority = 1
    with pytest.raises(IllegalArgumentException, match=f"{name} and priority"):
        setattr(set_after, name, value)


def test_priority_0_goes_with_a_group_as_in_5x_whose_setters_test_for_a_true_value() -> None:
    message = order()
    message.priority = 0
    message.message_group = "g"
    assert message.type_for_send(transactional=False, max_body_size=MAX) is MessageType.FIFO


def test_a_message_with_a_priority_is_a_priority_message_and_never_transactional() -> None:
    message = order()
    message.priority = 0
    assert message.type_for_send(transactional=False, max_body_size=MAX) is MessageType.PRIORITY
    with pytest.raises(IllegalArgumentException, match="priority"):
        message.type_for_send(transactional=True, max_body_size=MAX)
    assert Message.message_type_desc(6) == "PRIORITY"


def test_the_priority_travels_as_the_priority_header_and_reads_back() -> None:
    message = order()
    message.priority = 7
    assert (prop.PRIORITY, b"7") in message.to_wire().headers("MSGID")
    back = Message.from_received(received_on("Orders", [(prop.PRIORITY, b"7")]))
    assert (back.priority, back.properties) == (7, {})
    assert Message.from_received(received_on("Orders", [])).priority is None


def test_an_application_may_not_name_a_property_like_the_priority() -> None:
    message = order()
    message.add_property(prop.PRIORITY, "9")
    with pytest.raises(IllegalArgumentException, match="used by the system"):
        message.type_for_send(transactional=False, max_body_size=MAX)
