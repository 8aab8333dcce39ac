"""The 2.0 ``Producer``'s surface stays call-for-call; the extensions only add to it."""

from __future__ import annotations

import inspect

import pytest

from adapter.client import Producer

pytestmark = pytest.mark.timeout(10)

ORIGINAL = {
    "__init__": ["group_id", "orderly", "timeout", "compress_level", "max_message_size"],
    "send_sync": ["msg"],
    "send_oneway": ["msg"],
    "send_orderly_with_sharding_key": ["msg", "sharding_key"],
    "set_group": ["group_name"],
    "set_instance_name": ["name"],
    "set_name_server_address": ["addr"],
    "set_name_server_domain": ["domain"],
    "set_session_credentials": ["access_key", "access_secret", "channel"],
    "set_timeout": ["timeout"],
    "set_compress_level": ["level"],
    "set_max_message_size": ["max_size"],
    "set_message_trace": ["message_trace"],
    "start": [],
    "shutdown": [],
    "__enter__": [],
}
"""rocketmq-client-python 2.0's ``Producer``: each method and its parameters, in order
(``__exit__`` aside, whose arguments the ``with`` statement passes by position)."""


@pytest.mark.parametrize(("name", "parameters"), ORIGINAL.items())
def test_every_method_of_the_2_0_producer_takes_the_same_arguments(
    name: str, parameters: list[str]
) -> None:
    signature = inspect.signature(getattr(Producer, name))
    assert list(signature.parameters)[1 : len(parameters) + 1] == parameters
    extra = list(signature.parameters.values())[len(parameters) + 1 :]
    assert all(p.default is not inspect.Parameter.empty for p in extra), "no new required one"


def test_the_extensions_add_a_batch_and_an_async_send() -> None:
    assert list(inspect.signature(Producer.send_batch).parameters) == ["self", "messages"]
    send_async = list(inspect.signature(Producer.send_async).parameters)
    assert send_async == ["self", "msg", "callback", "exception_callback"]


def test_a_producer_is_a_context_manager_as_the_original() -> None:
    assert len(inspect.signature(Producer.__exit__).parameters) == 4
