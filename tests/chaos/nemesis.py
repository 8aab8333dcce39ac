"""The nemesis: faults injected into the three-broker cluster and the workers, each healed at
the end of its window.

Brokers run in podman containers (``tests.cluster``). Network faults are ``iptables`` rules put
into a node's own network namespace from the host (``nsenter``), so traffic goes only to the
test's containers: a partition drops packets between chosen nodes (clients still reach every
node), an isolated node drops everything but its loopback (clients included), loss drops a
share of every node's packets at random. ``tc netem`` delay is not in this machine's kernel,
so latency faults are not injected. Processes: SIGKILL or freeze (podman pause) a broker,
SIGKILL or SIGSTOP a worker, or set its wall clock off. Every heal is safe to run twice.
"""

from __future__ import annotations

import contextlib
import logging
import random
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from tests.chaos.workers import Workers
from tests.cluster import KafkaCluster, Node

log = logging.getLogger("chaos")

FAULTS = (
    "kill-broker",
    "pause-broker",
    "isolate-broker",
    "partition-halves",
    "partition-ring",
    "packet-loss",
    "kill-worker",
    "pause-worker",
    "skew-worker",
)
LOSS = "0.2"
"""The share of packets packet-loss drops on every node."""


@dataclass
class Injected:
    name: str
    """What was done, with the victim: ``pause-broker 2``."""
    heal: Callable[[], None]


class Nemesis:
    def __init__(self, cluster: KafkaCluster, workers: Workers, rng: random.Random) -> None:
        self._cluster = cluster
        self._workers = workers
        self._rng = rng

    def inject(self, fault: str) -> Injected:
        """Start ``fault`` on a victim chosen at random; what to call to heal it."""
        nodes = self._cluster.nodes
        if fault == "kill-broker":
            node = self._rng.choice(nodes)
            node.kill()
            return Injected(f"{fault} {node.node_id}", node.start)
        if fault == "pause-broker":
            node = self._rng.choice(nodes)
            node.pause()
            return Injected(f"{fault} {node.node_id}", node.unpause)
        if fault == "isolate-broker":
            node = self._rng.choice(nodes)
            _iptables(node, "-A", "INPUT", "!", "-i", "lo", "-j", "DROP")
            _iptables(node, "-A", "OUTPUT", "!", "-o", "lo", "-j", "DROP")
            return Injected(f"{fault} {node.node_id}", self.heal_network)
        if fault == "partition-halves":
            alone = self._rng.choice(nodes)
            for other in nodes:
                if other is not alone:
                    _cut(alone, other)
            return Injected(f"{fault} {alone.node_id} | rest", self.heal_network)
        if fault == "partition-ring":
            a, b = self._rng.sample(nodes, 2)
            _cut(a, b)  # the third still reaches both: a bridge between two halves
            return Injected(f"{fault} {a.node_id} x {b.node_id}", self.heal_network)
        if fault == "packet-loss":
            for node in nodes:
                _iptables(
                    node, "-A", "INPUT", "!", "-i", "lo", "-m", "statistic",
                    "--mode", "random", "--probability", LOSS, "-j", "DROP",
                )  # fmt: skip
            return Injected(f"{fault} {LOSS}", self.heal_network)
        if fault == "kill-worker":
            name = self._workers.kill_one(self._rng)
            return Injected(f"{fault} {name}", self._workers.replace_killed)
        if fault == "pause-worker":
            name = self._workers.pause_one(self._rng)
            return Injected(f"{fault} {name}", self._workers.resume_all)
        if fault == "skew-worker":
            name, skew_ms = self._workers.skew_one(self._rng)
            return Injected(f"{fault} {name} {skew_ms:+d} ms", self._workers.unskew_all)
        raise ValueError(f"unknown fault {fault!r}; one of {', '.join(FAULTS)}")

    def heal_network(self) -> None:
        for node in self._cluster.nodes:
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                _iptables(node, "-F", "INPUT")
                _iptables(node, "-F", "OUTPUT")

    def heal_all(self) -> None:
        """Every fault healed, whatever is in place: the end of a run."""
        self.heal_network()
        for node in self._cluster.nodes:
            with contextlib.suppress(Exception):
                status = node.status()
                if status == "paused":
                    node.unpause()
                elif status != "running":
                    node.start()
        self._workers.resume_all()
        self._workers.unskew_all()
        self._workers.replace_killed()


def _pid(node: Node) -> int:
    return int(node._wrapped().attrs["State"]["Pid"])


def _address(node: Node) -> str:
    networks = node._wrapped().attrs["NetworkSettings"]["Networks"]
    return str(next(iter(networks.values()))["IPAddress"])


def _iptables(node: Node, *rule: str) -> None:
    """``iptables rule`` inside ``node``'s network namespace."""
    subprocess.run(  # noqa: S603 - fixed argv
        ["nsenter", "-t", str(_pid(node)), "-n", "iptables", "-w", "5", *rule],  # noqa: S607
        check=True,
        capture_output=True,
        timeout=20,
    )


def _cut(a: Node, b: Node) -> None:
    """No packet between ``a`` and ``b``, either way."""
    _iptables(a, "-A", "INPUT", "-s", _address(b), "-j", "DROP")
    _iptables(a, "-A", "OUTPUT", "-d", _address(b), "-j", "DROP")
    _iptables(b, "-A", "INPUT", "-s", _address(a), "-j", "DROP")
    _iptables(b, "-A", "OUTPUT", "-d", _address(a), "-j", "DROP")
