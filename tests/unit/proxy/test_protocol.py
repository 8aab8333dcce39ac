"""The protocol's types come from the official client's wheel, without starting the client."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(60)


def run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=50, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_proxy_loads_the_generated_modules_without_the_client_package() -> None:
    out = run(
        "import sys; from adapter.proxy.protocol import Code, service_grpc;"
        "print(Code.Name(40402), hasattr(service_grpc, 'add_MessagingServiceServicer_to_server'),"
        " 'rocketmq' in sys.modules, 'rocketmq.v5.log' in sys.modules)"
    )
    assert out.split() == ["TOPIC_NOT_FOUND", "True", "False", "False"]


def test_the_official_client_still_imports_whole_after_the_proxy() -> None:
    out = run(
        "import adapter.proxy.protocol as p; import rocketmq, rocketmq.grpc_protocol as g;"
        "from rocketmq import Producer, ClientConfiguration;"
        "print(g.definition_pb2.Message.DESCRIPTOR is p.definition.Message.DESCRIPTOR)"
    )
    assert out.strip() == "True"
