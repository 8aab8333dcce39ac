"""Bad input gets a code, and the proxy keeps serving: unknown topics, huge bodies, bad
properties, conflicting types, unknown enum values, fuzzed requests, cut streams."""

from __future__ import annotations

import queue
import socket
import struct
from typing import Any

import grpc
import pytest
from google.protobuf.message import DecodeError
from hypothesis import given
from hypothesis import strategies as st

from adapter.proxy.protocol import Code, definition, service
from tests.integration.proxy.conftest import RunningProxy, StartProxy, proto_message, stub_of
from tests.support import ON_A_BROKER, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

T = definition.MessageType


def send(endpoint: str, *messages: Any) -> Any:
    with stub_of(endpoint) as stub:
        return stub.SendMessage(service.SendMessageRequest(messages=messages), timeout=30)


def still_serving(proxy: RunningProxy) -> None:
    with stub_of(proxy.endpoint) as stub:
        request = service.HeartbeatRequest(client_type=definition.ClientType.PRODUCER)
        assert stub.Heartbeat(request, timeout=10).status.code == Code.OK
    assert proxy.worker.process.poll() is None


@pytest.fixture
def topic(new_topic) -> str:
    return new_topic(partitions=2, prefix="ProxyBad")


def test_an_unknown_topic_is_topic_not_found_for_a_route_and_a_send(proxy: RunningProxy) -> None:
    with stub_of(proxy.endpoint) as stub:
        route = stub.QueryRoute(
            service.QueryRouteRequest(topic=definition.Resource(name="NoSuchTopic")), timeout=10
        )
    assert route.status.code == Code.TOPIC_NOT_FOUND
    assert send(proxy.endpoint, proto_message("NoSuchTopic")).status.code == Code.TOPIC_NOT_FOUND


def test_a_body_over_the_limit_is_too_large_and_one_over_grpc_s_is_refused_by_grpc(
    proxy: RunningProxy, topic: str
) -> None:
    big = send(proxy.endpoint, proto_message(topic, body=b"x" * (4 * 1024 * 1024 + 1)))
    assert big.status.code == Code.MESSAGE_BODY_TOO_LARGE
    with pytest.raises(grpc.RpcError) as caught:
        send(proxy.endpoint, proto_message(topic, body=b"x" * (65 * 1024 * 1024)))
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    still_serving(proxy)


@pytest.mark.parametrize(
    ("system", "code"),
    [
        ({"kind": T.TRANSACTION, "message_group": "g"}, Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
        ({"kind": 99}, Code.BAD_REQUEST),
        ({"kind": T.NORMAL, "body_encoding": 42}, Code.BAD_REQUEST),
        ({"kind": T.FIFO}, Code.ILLEGAL_MESSAGE_GROUP),
        ({"kind": T.NORMAL, "message_id": ""}, Code.ILLEGAL_MESSAGE_ID),
    ],
)
def test_a_message_breaking_a_rule_gets_its_code(
    proxy: RunningProxy, topic: str, system: dict[str, Any], code: int
) -> None:
    assert send(proxy.endpoint, proto_message(topic, **system)).status.code == code


def test_a_transactional_message_with_a_delivery_time_is_refused(
    proxy: RunningProxy, topic: str
) -> None:
    message = proto_message(topic, kind=T.TRANSACTION)
    message.system_properties.delivery_timestamp.seconds = 2_000_000_000
    assert send(proxy.endpoint, message).status.code == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE


def test_a_property_named_like_a_system_one_is_refused(proxy: RunningProxy, topic: str) -> None:
    message = proto_message(topic)
    message.user_properties["UNIQ_KEY"] = "mine"
    assert send(proxy.endpoint, message).status.code == Code.ILLEGAL_MESSAGE_PROPERTY_KEY


def test_a_type_the_topic_does_not_accept_is_refused_and_the_route_says_so(
    start_proxy: StartProxy, topic: str
) -> None:
    proxy = start_proxy("--topic-types", f"{topic}=NORMAL")
    fifo = proto_message(topic, kind=T.FIFO, message_group="g1")
    assert send(proxy.endpoint, fifo).status.code == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    with stub_of(proxy.endpoint) as stub:
        route = stub.QueryRoute(
            service.QueryRouteRequest(topic=definition.Resource(name=topic)), timeout=10
        )
    assert {tuple(q.accept_message_types) for q in route.message_queues} == {(T.NORMAL,)}


def test_more_messages_at_once_than_allowed_are_too_many_requests(
    start_proxy: StartProxy, topic: str
) -> None:
    proxy = start_proxy("--max-inflight", "1")
    answer = send(proxy.endpoint, proto_message(topic), proto_message(topic))
    assert answer.status.code == Code.TOO_MANY_REQUESTS
    assert send(proxy.endpoint, proto_message(topic)).status.code == Code.OK


@pytest.mark.parametrize(
    ("call", "request_", "code"),
    [
        (
            "EndTransaction",
            service.EndTransactionRequest(
                topic=definition.Resource(name="T"), message_id="m", transaction_id="0:1",
                resolution=9, source=1,
            ),
            Code.BAD_REQUEST,
        ),
        (
            "EndTransaction",
            service.EndTransactionRequest(
                topic=definition.Resource(name="T"), message_id="m", transaction_id="forged",
                resolution=1, source=1,
            ),
            Code.INVALID_TRANSACTION_ID,
        ),
        ("Heartbeat", service.HeartbeatRequest(client_type=77), Code.UNRECOGNIZED_CLIENT_TYPE),
        ("QueryAssignment", service.QueryAssignmentRequest(), Code.ILLEGAL_TOPIC),
        (
            "QueryAssignment",
            service.QueryAssignmentRequest(
                topic=definition.Resource(name="NoSuchTopicHere"),
                group=definition.Resource(name="GID_never"),
            ),
            Code.TOPIC_NOT_FOUND,
        ),
        (
            "ForwardMessageToDeadLetterQueue",
            service.ForwardMessageToDeadLetterQueueRequest(
                group=definition.Resource(name="GID_never"), topic=definition.Resource(name="T"),
                receipt_handle="forged", message_id="m", delivery_attempt=3,
                max_delivery_attempts=3,
            ),
            Code.INVALID_RECEIPT_HANDLE,
        ),
        (
            "QueryOffset",
            service.QueryOffsetRequest(
                message_queue=definition.MessageQueue(topic=definition.Resource(name="T"))
            ),
            Code.NOT_IMPLEMENTED,
        ),
        (
            "AckMessage",
            service.AckMessageRequest(
                group=definition.Resource(name="GID_never"), topic=definition.Resource(name="T"),
                entries=[service.AckMessageEntry(message_id="m", receipt_handle="forged")],
            ),
            Code.INVALID_RECEIPT_HANDLE,
        ),
        (
            "ChangeInvisibleDuration",
            service.ChangeInvisibleDurationRequest(
                group=definition.Resource(name="GID_never"), topic=definition.Resource(name="T"),
                receipt_handle="forged", message_id="m",
            ),
            Code.INVALID_RECEIPT_HANDLE,
        ),
    ],
)  # fmt: skip
def test_unknown_enum_values_and_forged_ids_get_codes(
    proxy: RunningProxy, call: str, request_: Any, code: int
) -> None:
    with stub_of(proxy.endpoint) as stub:
        assert getattr(stub, call)(request_, timeout=10).status.code == code
    still_serving(proxy)


@ON_A_BROKER
@given(raw=st.lists(st.binary(max_size=200), min_size=1, max_size=20))
def test_a_fuzzed_send_message_gets_an_answer_and_the_proxy_keeps_serving(
    proxy: RunningProxy, raw: list[bytes]
) -> None:
    with grpc.insecure_channel(proxy.endpoint) as channel:
        call = channel.unary_unary(
            "/apache.rocketmq.v2.MessagingService/SendMessage",
            request_serializer=None,
            response_deserializer=service.SendMessageResponse.FromString,
        )
        answers = [call(payload, timeout=10) for payload in raw]
    for payload, answer in zip(raw, answers, strict=True):
        assert Code.Name(answer.status.code), "an answer with a code of definition.proto"
        if not _parses(payload):
            assert answer.status.code == Code.BAD_REQUEST
    still_serving(proxy)


def _parses(raw: bytes) -> bool:
    try:
        service.SendMessageRequest.FromString(raw)
    except DecodeError:
        return False
    return True


def h2_frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    head = struct.pack(">I", len(payload))[1:] + bytes([kind, flags])
    return head + struct.pack(">I", stream) + payload


def literal(name: str, value: str) -> bytes:
    """An HPACK literal header field without indexing (lengths under 127)."""
    return b"\x00" + bytes([len(name)]) + name.encode() + bytes([len(value)]) + value.encode()


def test_a_stream_cut_mid_message_leaves_the_proxy_serving(proxy: RunningProxy) -> None:
    host, port = proxy.endpoint.rsplit(":", 1)
    headers = b"".join(
        literal(name, value)
        for name, value in [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/apache.rocketmq.v2.MessagingService/SendMessage"),
            (":authority", proxy.endpoint),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ]
    )
    half_a_message = b"\x00" + struct.pack(">I", 1000) + b"\x0a\x05trunc"
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        raw.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2_frame(4, 0, 0, b""))
        raw.sendall(h2_frame(1, 0x4, 1, headers) + h2_frame(0, 0, 1, half_a_message))
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        raw.sendall(b"\x16\x03\x01\x02\x00\x01")  # a TLS handshake that stops after six bytes
    still_serving(proxy)


def test_a_telemetry_stream_cut_by_its_client_ends_its_session(proxy: RunningProxy) -> None:
    settings = definition.Settings(client_type=definition.ClientType.PRODUCER)
    settings.publishing.topics.add(name="AnyTopic")
    with grpc.insecure_channel(proxy.endpoint) as channel:
        stream = channel.stream_stream(
            "/apache.rocketmq.v2.MessagingService/Telemetry",
            request_serializer=service.TelemetryCommand.SerializeToString,
            response_deserializer=service.TelemetryCommand.FromString,
        )
        outgoing: queue.Queue[Any] = queue.Queue()
        outgoing.put(service.TelemetryCommand(settings=settings))
        answers = stream(iter(outgoing.get, None), timeout=30)
        first = next(answers)
        assert first.status.code == Code.OK
        assert first.settings.publishing.validate_message_type
        assert "rmq_proxy_sessions 1.0" in proxy.scrape()[1]
        answers.cancel()
        outgoing.put(None)
    wait_until(lambda: "rmq_proxy_sessions 0.0" in proxy.scrape()[1], timeout=20)
    still_serving(proxy)
