"""A received message as the protocol's ``Message``: what a gRPC consumer is told of it."""

from __future__ import annotations

import pytest

from adapter.proxy.protocol import definition
from adapter.proxy.receives import to_protocol
from adapter.v5 import Message

pytestmark = pytest.mark.timeout(30)


def received(**fields: object) -> Message:
    message = Message()
    message.topic = "Orders"
    message.body = b"x"
    for name, value in fields.items():
        setattr(message, name, value)
    return message


def test_a_priority_message_reaches_a_grpc_consumer_with_its_priority() -> None:
    system = to_protocol(received(priority=7)).system_properties
    assert system.priority == 7
    assert system.message_type == definition.MessageType.PRIORITY


def test_a_plain_message_is_normal_and_has_no_priority() -> None:
    system = to_protocol(received()).system_properties
    assert system.message_type == definition.MessageType.NORMAL
    assert not system.HasField("priority")
