"""adapter.v5 has the names, constructor signatures and attributes of the 5.x ``rocketmq``
package, as read from rocketmq-python-client 5.1.2 (recorded here, so the check needs no
RocketMQ package)."""

from __future__ import annotations

import inspect

import pytest

import adapter.v5

pytestmark = pytest.mark.timeout(30)

# name -> (constructor parameters with defaults, public attributes the adapter provides)
FIVE_X = {
    "Producer": (
        "(client_configuration, topics=None, checker=None, tls_enable=False)",
        {
            "DEFAULT_MAX_BODY_SIZE",
            "DEFAULT_MAX_SEND_ATTEMPTS",
            "begin_transaction",
            "send",
            "send_async",
            "recall_message",
            "recall_message_async",
            "startup",
            "shutdown",
            "is_running",
            "client_id",
            "topics",
            "client_configuration",
        },
    ),
    "Transaction": (
        "(producer)",
        {"add_half_message", "add_send_receipt", "commit", "rollback", "message_id"},
    ),
    "Message": (
        "()",
        {
            "add_property",
            "body",
            "born_host",
            "born_timestamp",
            "corrupted",
            "delivery_attempt",
            "delivery_timestamp",
            "keys",
            "message_group",
            "message_id",
            "message_type",
            "message_type_desc",
            "namespace",
            "properties",
            "tag",
            "topic",
        },
    ),
    "SendReceipt": (
        "(message_id, transaction_id, message_queue, offset, recall_handle=None)",
        {"message_id", "message_queue", "offset", "recall_handle", "transaction_id"},
    ),
    "ClientConfiguration": (
        "(endpoints, credentials, namespace='', request_timeout=3)",
        {"credentials", "namespace", "request_timeout"},
    ),
    "Credentials": ("(ak='', sk='')", {"ak", "sk"}),
    "FilterExpression": (
        "(expression='*', filter_type=<FilterType.TAG: 1>)",
        {"expression", "filter_type", "TAG_EXPRESSION_SUB_ALL"},
    ),
}
SIMPLE_CONSUMER = (
    "(client_configuration, consumer_group, subscription=None, await_duration=20, "
    "tls_enable=False)",
    {
        "startup",
        "shutdown",
        "subscribe",
        "unsubscribe",
        "receive",
        "receive_async",
        "ack",
        "ack_async",
        "change_invisible_duration",
        "change_invisible_duration_async",
        "consumer_group",
        "await_duration",
        "is_running",
        "client_id",
        "client_configuration",
    },
)


PUSH_CONSUMER = (
    "(client_configuration, consumer_group, message_listener, subscription, "
    "max_cache_message_count=1024, max_cache_message_size=67108864, "
    "consumption_thread_count=20, tls_enable=False)",
    {
        "startup",
        "shutdown",
        "subscribe",
        "unsubscribe",
        "consumer_group",
        "is_running",
        "client_id",
        "fifo",
    },
)


def without_annotations(obj: type) -> str:
    """The signature without annotations and without keyword-only adapter extensions."""
    signature = inspect.signature(obj)
    parameters = [
        p.replace(annotation=inspect.Parameter.empty)
        for p in signature.parameters.values()
        if p.kind is not inspect.Parameter.KEYWORD_ONLY
    ]
    return str(signature.replace(parameters=parameters, return_annotation=inspect.Signature.empty))


def test_the_package_exports_the_5x_producer_and_simple_consumer_names() -> None:
    assert set(adapter.v5.__all__) == {
        *FIVE_X,
        "SimpleConsumer",
        "PushConsumer",
        "LitePushConsumer",
        "MessageListener",
        "ConsumeResult",
        "FilterType",
        "TransactionChecker",
        "TransactionResolution",
    }


LITE_PUSH_CONSUMER = (
    "(client_configuration, consumer_group, bind_topic, message_listener=None, "
    "max_cache_message_count=1024, max_cache_message_size=67108864, "
    "consumption_thread_count=20, tls_enable=False)",
    {
        "startup",
        "shutdown",
        "subscribe",
        "unsubscribe",
        "subscribe_lite",
        "unsubscribe_lite",
        "consumer_group",
        "is_running",
        "client_id",
    },
)


CONSUMERS = {
    "SimpleConsumer": SIMPLE_CONSUMER,
    "PushConsumer": PUSH_CONSUMER,
    "LitePushConsumer": LITE_PUSH_CONSUMER,
}


@pytest.mark.parametrize("name", sorted(CONSUMERS))
def test_each_consumer_has_the_5x_parameters_then_keyword_only_extensions(name: str) -> None:
    parameters, attributes = CONSUMERS[name]
    cls = getattr(adapter.v5, name)
    signature = inspect.signature(cls)
    positional = [
        p.replace(annotation=inspect.Parameter.empty)
        for p in signature.parameters.values()
        if p.kind is not inspect.Parameter.KEYWORD_ONLY
    ]
    assert str(inspect.Signature(positional)) == parameters
    assert attributes <= {a for a in dir(cls) if not a.startswith("_")}


def test_the_listener_is_an_abstract_class_with_consume_and_the_results_are_5x_s() -> None:
    assert inspect.isabstract(adapter.v5.MessageListener)
    assert list(inspect.signature(adapter.v5.MessageListener.consume).parameters) == [
        "self",
        "message",
    ]
    assert {r.name: r.value for r in adapter.v5.ConsumeResult} == {"SUCCESS": 0, "FAILURE": 1}


@pytest.mark.parametrize("name", sorted(FIVE_X))
def test_each_class_has_the_5x_constructor_and_attributes(name: str) -> None:
    parameters, attributes = FIVE_X[name]
    cls = getattr(adapter.v5, name)
    assert without_annotations(cls) == parameters
    assert attributes <= {a for a in dir(cls) if not a.startswith("_")}


def test_the_checker_is_an_abstract_class_with_check() -> None:
    assert inspect.isabstract(adapter.v5.TransactionChecker)
    assert list(inspect.signature(adapter.v5.TransactionChecker.check).parameters) == [
        "self",
        "message",
    ]
