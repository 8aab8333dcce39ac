"""RocketMQ 5.x's protocol types (``apache.rocketmq.v2``), from the official client's wheel.

The proxy speaks the protocol of apache/rocketmq-apis (``service.proto``, ``definition.proto``)
through the modules generated from it that ship in ``rocketmq-python-client`` (the ``proxy``
extra pins the version): ``definition_pb2`` (messages, enums, the status ``Code``),
``service_pb2`` (requests and responses) and ``service_pb2_grpc`` (the service, server side
included). Nothing of upstream is copied into this repository.

Those modules live in the package ``rocketmq.grpc_protocol``, whose parent ``rocketmq`` starts
the 5.x *client* when imported: it configures logging to a file under ``~/logs`` (failing where
the home directory is read-only) and loads OpenTelemetry. The proxy needs none of that, so it
imports ``rocketmq.grpc_protocol`` under a bare stand-in for its parent, which it removes
afterwards; an ``import rocketmq`` later in the same process (a test running the official
client) still runs the client's own package and finds these modules loaded.

Known gaps: none.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType
from typing import Any

__all__ = ["definition", "service", "service_grpc", "Code", "PROTOCOL_PACKAGE"]

PROTOCOL_PACKAGE = "rocketmq.grpc_protocol"


def _load() -> ModuleType:
    loaded = sys.modules.get(PROTOCOL_PACKAGE)
    if loaded is not None:
        return loaded
    if "rocketmq" in sys.modules:  # the client is imported already: its package is complete
        return importlib.import_module(PROTOCOL_PACKAGE)
    spec = importlib.util.find_spec("rocketmq")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "rmq-adapter proxy needs the 'proxy' extra: pip install 'rmq-kafka-adapter[proxy]'"
        )
    parent = ModuleType("rocketmq")
    parent.__path__ = list(spec.submodule_search_locations)
    sys.modules["rocketmq"] = parent
    try:
        return importlib.import_module(PROTOCOL_PACKAGE)
    finally:
        # Forget the stand-in and what was loaded under it: a later ``import rocketmq`` then
        # loads the client's package whole (the descriptors are registered once; the same
        # file loaded again is accepted by protobuf's pool).
        for name in [n for n in sys.modules if n == "rocketmq" or n.startswith("rocketmq.")]:
            del sys.modules[name]


_package = _load()
definition: Any = _package.definition_pb2
"""``definition.proto``: Message, Resource, Settings, Status, Code, MessageType, ..."""
service: Any = _package.service_pb2
"""``service.proto``: the requests and responses of ``MessagingService``."""
service_grpc: Any = _package.service_pb2_grpc
"""``MessagingServiceServicer`` and ``add_MessagingServiceServicer_to_server``."""
Code: Any = definition.Code
"""The status codes every client turns into its own exceptions."""
