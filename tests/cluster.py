"""A three-broker KRaft cluster in containers, for the fault tests of ``tests/integration/cluster``.

Three containers of the suite's Kafka image (``tests/brokers.py``), each a combined broker and
controller, on the host's network with 127.0.0.1 listeners (so no container DNS is needed and
nothing listens beyond loopback). Internal topics are replicated three times with
``min.insync.replicas`` 2, as on a production cluster. Faults: SIGKILL a node's container,
freeze it (``podman pause``), stop it gracefully, and start it again on the same data.
"""

from __future__ import annotations

import contextlib
import re
import time
from dataclasses import dataclass, field

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from adapter.kafka import clients
from adapter.ops import broker as local_broker
from tests.brokers import TEST_LABEL, kafka_env, kafka_image
from tests.support import wait_until

_EPOCH = re.compile(r"\bepoch=(\d+)")
_LEADER = re.compile(r"\bleader=(\d+)")

CLUSTER_SETTINGS = {
    **local_broker.SINGLE_NODE_SETTINGS,
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "unclean.leader.election.enable": "false",
}


def node_env(node_id: int, ports: list[tuple[int, int]]) -> dict[str, str]:
    """The KAFKA_* environment of node ``node_id`` (1-based) of a cluster on ``ports``
    (client port, controller port) per node."""
    port, controller = ports[node_id - 1]
    voters = ",".join(f"{i + 1}@127.0.0.1:{c}" for i, (_, c) in enumerate(ports))
    settings = {
        **CLUSTER_SETTINGS,
        "node.id": str(node_id),
        "controller.quorum.voters": voters,
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
    }
    return kafka_env(settings, cluster_id="rmqkafkaclusterAAAAAA", heap="-Xmx512m -Xms192m")


@dataclass
class Node:
    node_id: int
    port: int
    controller: int
    container: object

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _wrapped(self):  # type: ignore[no-untyped-def]
        wrapped = self.container.get_wrapped_container()  # type: ignore[attr-defined]
        wrapped.reload()
        return wrapped

    def log_lines(self) -> list[str]:
        out, err = self.container.get_logs()  # type: ignore[attr-defined]
        return ((out or b"") + (err or b"")).decode(errors="replace").splitlines()

    def status(self) -> str:
        """``running``, ``paused``, ``exited``, ..., as the engine reports it."""
        return str(self._wrapped().status)

    def kill(self) -> None:
        """SIGKILL the broker: no shutdown, no flush."""
        self._wrapped().kill(signal="SIGKILL")
        self._wrapped().wait(timeout=60)

    def stop(self) -> None:
        """Stop it as an operator does (SIGTERM, SIGKILL after 60 s)."""
        self._wrapped().stop(timeout=60)

    def start(self) -> None:
        self._wrapped().start()

    def pause(self) -> None:
        self._wrapped().pause()

    def unpause(self) -> None:
        self._wrapped().unpause()

    def remove(self) -> None:
        with contextlib.suppress(Exception):
            if self._wrapped().status == "paused":
                self.unpause()
        with contextlib.suppress(Exception):
            self.container.stop()  # type: ignore[attr-defined]


@dataclass
class KafkaCluster:
    nodes: list[Node]
    description: str = ""
    _admin: AdminClient | None = field(default=None, repr=False)

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = clients.admin({"bootstrap.servers": self.bootstrap})
        return self._admin

    def node(self, node_id: int) -> Node:
        return self.nodes[node_id - 1]

    def leader_of(self, topic: str, partition: int) -> Node:
        """The node that leads ``partition`` of Kafka topic ``topic`` now."""
        metadata = self.admin().list_topics(topic, timeout=10)
        return self.node(metadata.topics[topic].partitions[partition].leader)

    def brokers_up(self) -> int:
        return len(self.admin().list_topics(timeout=10).brokers)

    def in_sync(self, topics: list[str]) -> bool:
        """Every partition of ``topics`` has all three replicas in sync."""
        metadata = self.admin().list_topics(timeout=10)
        for name in topics:
            found = metadata.topics.get(name)
            if found is None or found.error is not None:
                return False
            if any(len(p.isrs) < 3 for p in found.partitions.values()):
                return False
        return True

    def wait_healthy(self, topics: list[str] = (), timeout: float = 120) -> None:  # type: ignore[assignment]
        """All three brokers registered and every partition of ``topics`` fully in sync."""
        wait_until(
            lambda: _quiet(lambda: self.brokers_up() == 3 and self.in_sync(list(topics))),
            timeout=timeout,
            interval=1.0,
            what="three brokers up and every replica in sync",
        )

    def quorum_leader(self) -> Node:
        """The active controller (the KRaft quorum leader) of the latest epoch, as the nodes'
        own logs tell it (the image carries no ``kafka-metadata-quorum`` tool)."""
        best: tuple[int, int] | None = None
        for node in self.nodes:
            for line in node.log_lines():
                if "Completed transition to" not in line:
                    continue
                epoch = _EPOCH.search(line)
                if epoch is None:
                    continue
                if "transition to Leader(" in line:
                    leader = node.node_id
                else:
                    named = _LEADER.search(line)
                    if named is None:
                        continue
                    leader = int(named.group(1))
                if best is None or int(epoch.group(1)) > best[0]:
                    best = (int(epoch.group(1)), leader)
        if best is None:
            raise AssertionError("no node has logged a quorum leader yet")
        return self.node(best[1])

    def stop(self) -> None:
        for node in self.nodes:
            node.remove()


def _quiet(check):  # type: ignore[no-untyped-def]
    try:
        return check()
    except (KafkaException, KeyError):
        return False


def start_cluster() -> KafkaCluster:
    from testcontainers.core.container import DockerContainer

    ports: list[tuple[int, int]] = []
    while len(ports) < 3:
        port = local_broker.free_port_pair()
        if all(abs(port - p) > 1 for p, _ in ports):
            ports.append((port, port + 1))
    image = kafka_image()
    nodes: list[Node] = []
    try:
        for node_id in (1, 2, 3):
            container = (
                DockerContainer(image)
                .with_envs(**node_env(node_id, ports))
                .with_kwargs(network_mode="host", labels={TEST_LABEL: "kafka-cluster"})
            )
            container.start()  # no wait: a node is ready only once the quorum has formed
            nodes.append(Node(node_id, *ports[node_id - 1], container))
        cluster = KafkaCluster(nodes)
        started = time.monotonic()
        cluster.wait_healthy(timeout=180)
        cluster.description = (
            f"testcontainers: three {image} nodes at {cluster.bootstrap} "
            f"(ready in {time.monotonic() - started:.0f} s)"
        )
        return cluster
    except BaseException:
        for node in nodes:
            node.remove()
        raise
