"""A three-broker KRaft cluster in containers, for the fault tests of ``tests/integration/cluster``.

Three containers of the suite's Kafka image (``tests/brokers.py``), each a combined broker and
controller, on one podman network made for the run: the nodes find each other by their network
aliases ``kafka-1``..``kafka-3`` (the network's DNS), and replication and the KRaft quorum run
over that network. Internal topics are replicated three times with ``min.insync.replicas`` 2,
as on a production cluster. Faults: SIGKILL a node's container, freeze it (``podman pause``),
stop it gracefully, and start it again on the same data and address.

Each node publishes two client listeners on 127.0.0.1 only (nothing listens beyond loopback),
each advertised as the host port it is mapped to: PLAINTEXT (whose anonymous principal is a
super user, for the fault tests and for setting up users and ACLs) and SECURE,
SASL/SCRAM-SHA-512 over TLS with a certificate for 127.0.0.1 signed by a CA made for the run
(``openssl``), where Kafka's ``StandardAuthorizer`` enforces ACLs.
"""

from __future__ import annotations

import contextlib
import logging
import re
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import docker.errors
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from adapter.kafka import clients
from adapter.ops import broker as local_broker
from tests.brokers import TEST_LABEL, kafka_env, kafka_image
from tests.support import wait_until

log = logging.getLogger(__name__)

_EPOCH = re.compile(r"\bepoch=(\d+)")
_LEADER = re.compile(r"\bleader=(\d+)")
_ENTERED = re.compile(r"Completed transition to (\w+)\((.*?)\) from ")


def quorum_leader_in(logs: dict[int, list[str]]) -> int | None:
    """The node that leads the KRaft quorum at the highest epoch the nodes' logs (by node id)
    name a leader in, or None. Only the state a node *entered* counts: the line also prints the
    state it left (``... from FollowerState(epoch=7, leader=3, ...)``), whose leader is stale
    once the epoch moves on. A node that entered ``Leader(...)`` leads; one that entered
    ``FollowerState(...)`` names its leader; candidates and unattached voters name none."""
    best: tuple[int, int] | None = None
    for node_id, lines in logs.items():
        for line in lines:
            entered = _ENTERED.search(line)
            if entered is None:
                continue
            state, fields = entered.groups()
            epoch = _EPOCH.search(fields)
            if epoch is None:
                continue
            if state == "Leader":
                leader = node_id
            elif state == "FollowerState" and (named := _LEADER.search(fields)) is not None:
                leader = int(named.group(1))
            else:
                continue
            if best is None or int(epoch.group(1)) > best[0]:
                best = (int(epoch.group(1)), leader)
    return None if best is None else best[1]


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


SCRAM = "SCRAM-SHA-512"
CERTS = "/certs"


INTERNAL_PORT, CONTROLLER_PORT, CLIENT_PORT, SECURE_PORT = 9092, 9093, 19092, 19094
"""The ports inside every node's container; only the two client ports are published."""


def alias(node_id: int) -> str:
    return f"kafka-{node_id}"


def node_env(node_id: int, ports: list[tuple[int, int]]) -> dict[str, str]:
    """The KAFKA_* environment of node ``node_id`` (1-based) of a cluster whose nodes publish
    their client and secure listeners on 127.0.0.1 at ``ports``."""
    port, secure = ports[node_id - 1]
    voters = ",".join(f"{i}@{alias(i)}:{CONTROLLER_PORT}" for i in range(1, len(ports) + 1))
    settings = {
        **CLUSTER_SETTINGS,
        "node.id": str(node_id),
        "controller.quorum.voters": voters,
        "listeners": (
            f"INTERNAL://0.0.0.0:{INTERNAL_PORT},CONTROLLER://0.0.0.0:{CONTROLLER_PORT},"
            f"PLAINTEXT://0.0.0.0:{CLIENT_PORT},SECURE://0.0.0.0:{SECURE_PORT}"
        ),
        "advertised.listeners": (
            f"INTERNAL://{alias(node_id)}:{INTERNAL_PORT},"
            f"PLAINTEXT://127.0.0.1:{port},SECURE://127.0.0.1:{secure}"
        ),
        "inter.broker.listener.name": "INTERNAL",
        "listener.security.protocol.map": (
            "INTERNAL:PLAINTEXT,PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SECURE:SASL_SSL"
        ),
        "sasl.enabled.mechanisms": SCRAM,
        "listener.name.secure.sasl.enabled.mechanisms": SCRAM,
        "listener.name.secure.scram-sha-512.sasl.jaas.config": (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        ),
        "listener.name.secure.ssl.keystore.type": "PEM",
        "listener.name.secure.ssl.keystore.location": f"{CERTS}/broker.pem",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS;User:admin",
    }
    return kafka_env(settings, cluster_id="rmqkafkaclusterAAAAAA", heap="-Xmx512m -Xms192m")


def _again(call: Callable[[], object], what: str, tries: int = 5) -> None:
    """``call()``, asked again after a failure of the container runtime, ``tries`` times."""
    for attempt in range(1, tries + 1):
        try:
            call()
            return
        except docker.errors.APIError:
            if attempt == tries:
                raise
            log.warning(
                "container %s failed (attempt %d of %d); again in 1 s", what, attempt, tries
            )
            time.sleep(1.0)


@dataclass
class Node:
    node_id: int
    port: int
    secure: int
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
        """Freeze the broker (SIGSTOP through the cgroup freezer). runc's freeze fails now and
        then on this machine ("runc pause ... exit status 1", once in a CI run's first seconds):
        it is asked again, up to 5 times."""
        _again(self._wrapped().pause, "pause")

    def unpause(self) -> None:
        _again(self._wrapped().unpause, "unpause")

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

    @property
    def secure_bootstrap(self) -> str:
        """SASL/SCRAM-SHA-512 over TLS, with ACLs enforced (``ca`` verifies the brokers)."""
        return ",".join(f"127.0.0.1:{n.secure}" for n in self.nodes)

    ca: str = ""
    """The PEM file of the CA that signed the brokers' certificate."""

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
        leader = quorum_leader_in({node.node_id: node.log_lines() for node in self.nodes})
        if leader is None:
            raise AssertionError("no node has logged a quorum leader yet")
        return self.node(leader)

    network: object = None
    """The podman network the nodes share (testcontainers' ``Network``)."""

    def stop(self) -> None:
        for node in self.nodes:
            node.remove()
        if self.network is not None:
            with contextlib.suppress(Exception):
                self.network.remove()  # type: ignore[attr-defined]


def _quiet(check):  # type: ignore[no-untyped-def]
    try:
        return check()
    except (KafkaException, KeyError):
        return False


def make_certificates(directory: Path) -> None:
    """A CA (``ca.pem``) and a certificate for 127.0.0.1 it signs, with its key, in one PEM
    file as Kafka's PEM key store reads it (``broker.pem``)."""

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=directory, check=True, capture_output=True)  # noqa: S603, S607

    subject = "/CN=rmq-kafka-adapter test CA"
    openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        subject,
    )
    openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "broker.key",
        "-out",
        "broker.csr",
        "-subj",
        "/CN=127.0.0.1",
    )
    (directory / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl(
        "x509",
        "-req",
        "-in",
        "broker.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "broker.crt",
        "-days",
        "2",
        "-extfile",
        "san.ext",
    )
    key = (directory / "broker.key").read_text()
    (directory / "broker.pem").write_text(key + (directory / "broker.crt").read_text())
    for name in ("broker.pem", "ca.pem"):
        (directory / name).chmod(0o644)


def start_cluster(certificates: Path) -> KafkaCluster:
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.network import Network

    make_certificates(certificates)
    ports: list[tuple[int, int]] = []
    while len(ports) < 3:
        pair = (local_broker.free_port_pair(), local_broker.free_port_pair())
        if pair[0] != pair[1] and not set(pair) & {p for taken in ports for p in taken}:
            ports.append(pair)
    image = kafka_image()
    network = Network(docker_network_kw={"labels": {TEST_LABEL: "kafka-cluster"}}).create()
    nodes: list[Node] = []
    try:
        for node_id in (1, 2, 3):
            port, secure = ports[node_id - 1]
            container = (
                DockerContainer(image)
                .with_envs(**node_env(node_id, ports))
                .with_volume_mapping(str(certificates), CERTS, "ro")
                .with_network(network)
                .with_network_aliases(alias(node_id))
                .with_kwargs(labels={TEST_LABEL: "kafka-cluster"})
            )
            # published on loopback only (testcontainers' with_bind_ports binds every address)
            container.ports[f"{CLIENT_PORT}/tcp"] = ("127.0.0.1", port)
            container.ports[f"{SECURE_PORT}/tcp"] = ("127.0.0.1", secure)
            container.start()  # no wait: a node is ready only once the quorum has formed
            nodes.append(Node(node_id, port, secure, container))
        cluster = KafkaCluster(nodes, ca=str(certificates / "ca.pem"), network=network)
        started = time.monotonic()
        cluster.wait_healthy(timeout=180)
        cluster.description = (
            f"testcontainers: three {image} nodes on podman network {network.name}, "
            f"published at {cluster.bootstrap} (ready in {time.monotonic() - started:.0f} s)"
        )
        return cluster
    except BaseException:
        for node in nodes:
            node.remove()
        with contextlib.suppress(Exception):
            network.remove()
        raise
