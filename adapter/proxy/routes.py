"""``QueryRoute``, ``Heartbeat`` and ``NotifyClientTermination``: where a topic lives, and
who is there.

Reproduces RocketMQ 5's ``RouteActivity`` and ``ClientActivity`` for what a producer needs:

- ``QueryRoute``: one message queue per Kafka partition of the topic (queue id = partition),
  readable and writable, all on one broker whose endpoints are the ones the client reached the
  proxy by (as RocketMQ's proxy answers with the request's endpoints), so that every call of
  the client comes back to this address, whichever proxy serves it; each queue lists the
  message types the topic accepts (PRIORITY only on a topic made for priorities: the Java
  client 5.0.x refuses a route naming a type it does not know). A topic that does not exist is
  ``TOPIC_NOT_FOUND``;
- ``QueryAssignment``: a push consumer's queue, one (id -1) on that same broker, shared by
  every consumer of its group, as RocketMQ's proxy answers a group that is not FIFO;
- ``Heartbeat``: answered; the client's Telemetry stream is what keeps it known;
- ``NotifyClientTermination``: the client's sessions on this proxy end.

A topic unknown to the proxy is looked for during a second (one created a moment ago).

Known gaps: none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from adapter import naming
from adapter.kafka.metadata import MissingTopic, PartitionCounts
from adapter.proxy import codes
from adapter.proxy.auth import Account, Perm
from adapter.proxy.codes import Code, ProxyError
from adapter.proxy.config import Address, ProxyConfig
from adapter.proxy.messages import resource_name
from adapter.proxy.protocol import definition, service
from adapter.proxy.sends import NEW_TOPIC_WAIT_S
from adapter.proxy.sessions import Sessions

__all__ = ["BROKER_NAME", "Routes"]

BROKER_NAME = "rmq-adapter"
"""The one broker every route names: the proxies in front of the Kafka cluster."""


class Routes:
    def __init__(
        self,
        config: ProxyConfig,
        topics: PartitionCounts,
        sessions: Sessions,
        bands: Callable[[str], Mapping[int, str]],
    ) -> None:
        self._config = config
        self._topics = topics
        self._sessions = sessions
        self._bands = bands

    def query_route(self, request: Any, account: Account, bound: Address) -> Any:
        """The route of ``request.topic`` (blocking: it may ask Kafka)."""
        topic = resource_name(request.topic)
        account.require(Perm.PUB | Perm.SUB, topic=topic)  # either will do
        partitions = self._partitions(topic)
        broker = definition.Broker(name=BROKER_NAME, id=0, endpoints=_endpoints(request, bound))
        kinds = ["NORMAL", "FIFO", "DELAY", "TRANSACTION"]
        if self._bands(naming.kafka_topic(topic)):
            # Only a topic made for priorities says PRIORITY: clients older than the type
            # (the Java client 5.0.x) refuse a route naming a type they do not know.
            kinds.append("PRIORITY")
        accepted = [
            definition.MessageType.Value(kind)
            for kind in kinds
            if kind in self._config.accepted_types(topic)
        ]
        queues = [
            definition.MessageQueue(
                topic=request.topic,
                id=queue,
                permission=definition.Permission.READ_WRITE,
                broker=broker,
                accept_message_types=accepted,
            )
            for queue in range(partitions)
        ]
        return service.QueryRouteResponse(status=codes.status(), message_queues=queues)

    def query_assignment(self, request: Any, account: Account, bound: Address) -> Any:
        """The queues a push consumer of ``request.group`` receives from: as RocketMQ's proxy
        answers a group that is not FIFO, one queue (id -1) on the one broker, which every
        consumer of the group shares (blocking: it may ask Kafka)."""
        topic = resource_name(request.topic)
        group = resource_name(request.group, "consumer group")
        account.require(Perm.SUB, topic=topic, group=group)
        self._partitions(topic)
        queue = definition.MessageQueue(
            topic=request.topic,
            id=-1,
            permission=definition.Permission.READ_WRITE,
            broker=definition.Broker(name=BROKER_NAME, id=0, endpoints=_endpoints(request, bound)),
        )
        return service.QueryAssignmentResponse(
            status=codes.status(), assignments=[definition.Assignment(message_queue=queue)]
        )

    def _partitions(self, topic: str) -> int:
        try:
            kafka_topic = naming.kafka_topic(topic)
        except ValueError as exc:
            raise ProxyError(Code.ILLEGAL_TOPIC, str(exc)) from exc
        try:
            return self._topics.require(kafka_topic, wait_s=NEW_TOPIC_WAIT_S)
        except MissingTopic as exc:
            raise ProxyError(Code.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist") from exc

    def heartbeat(self, request: Any) -> Any:
        if request.client_type not in definition.ClientType.values():
            raise ProxyError(
                Code.UNRECOGNIZED_CLIENT_TYPE, f"unknown client type {request.client_type}"
            )
        return service.HeartbeatResponse(status=codes.status())

    def terminate(self, client_id: str) -> Any:
        for session in self._sessions.of_client(client_id):
            session.end()
        return service.NotifyClientTerminationResponse(status=codes.status())


def _endpoints(request: Any, bound: Address) -> Any:
    """The endpoints the client reached the proxy by, else the address the proxy is bound to."""
    if request.endpoints.addresses:
        return request.endpoints
    return definition.Endpoints(
        scheme=definition.AddressScheme.IPv4,
        addresses=[definition.Address(host=bound.host, port=bound.port)],
    )
