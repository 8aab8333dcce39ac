"""The Kafka broker under test, found in the order of DESIGN.md section 7, with fault injection.

1. ``KAFKA_BOOTSTRAP``: an existing cluster (no fault injection: the suite does not own it).
2. testcontainers, when a Docker-compatible engine answers (podman here, Docker elsewhere), or
   when ``RMQ_TEST_KAFKA=testcontainers`` demands it (then an engine that does not answer is an
   error, never a silent fall-back).
3. A local broker process from the pinned jars, or when ``RMQ_TEST_KAFKA=process`` asks for it.

Every broker the suite starts is a single KRaft node with the settings of
``adapter.ops.broker.SINGLE_NODE_SETTINGS`` (offsets and transaction state at replication factor 1).
Fault injection: ``pause()`` / ``unpause()`` freeze the broker (container pause, or SIGSTOP for a
process) and ``restart()`` stops and starts it on the same address and data.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Protocol

import pytest

from adapter.ops import broker as local_broker
from tests.support import wait_until

ROOT = Path(__file__).resolve().parent.parent
TEST_LABEL = "rmq-kafka-adapter.test"
OFFICIAL_IMAGE = "apache/kafka:4.3.1"


class Broker(Protocol):
    bootstrap: str
    description: str

    def pause(self) -> None: ...
    def unpause(self) -> None: ...
    def restart(self) -> None: ...
    def down(self) -> None: ...
    def up(self) -> None: ...
    def stop(self) -> None: ...


def wait_until_ready(bootstrap: str, timeout: float = 90.0) -> None:
    wait_until(
        lambda: local_broker.is_ready(bootstrap),
        timeout=timeout,
        interval=0.5,
        what=f"the broker at {bootstrap} to answer",
    )


@contextlib.contextmanager
def paused(broker: Broker) -> Iterator[None]:
    """Freeze the broker for the duration of the block."""
    broker.pause()
    try:
        yield
    finally:
        broker.unpause()


class ExistingCluster:
    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.description = f"the existing cluster at {bootstrap} (KAFKA_BOOTSTRAP)"

    def _refuse(self) -> None:
        pytest.skip("fault injection needs a broker the suite started, not KAFKA_BOOTSTRAP")

    pause = unpause = restart = down = up = _refuse

    def stop(self) -> None:
        pass


class LocalProcessBroker:
    def __init__(self, data_dir: Path, overrides: Mapping[str, str]) -> None:
        self.config = local_broker.BrokerConfig(
            data_dir, port=local_broker.free_port_pair(), overrides=tuple(overrides.items())
        )
        self.bootstrap = local_broker.start(self.config)
        self.description = f"a local broker process at {self.bootstrap} (data in {data_dir})"

    def _signal(self, signum: signal.Signals) -> None:
        pid = local_broker.read_pid(self.config.data_dir)
        assert pid is not None, "the broker process is not running"
        os.kill(pid, signum)

    def pause(self) -> None:
        self._signal(signal.SIGSTOP)

    def unpause(self) -> None:
        self._signal(signal.SIGCONT)

    def restart(self) -> None:
        self.down()
        self.up()

    def down(self) -> None:
        """Stop the broker (SIGTERM, as an operator does), keeping its address and data."""
        local_broker.stop(self.config.data_dir)

    def up(self) -> None:
        local_broker.start(self.config)

    def stop(self) -> None:
        with contextlib.suppress(AssertionError, ProcessLookupError):
            self.unpause()  # a stopped JVM cannot handle SIGTERM
        local_broker.stop(self.config.data_dir)


def container_env(host: str, port: int, overrides: Mapping[str, str]) -> dict[str, str]:
    """The apache/kafka style environment (KAFKA_* properties) of a one-node broker.

    The broker listens inside the container on the same port the host maps, because it also
    connects to its own advertised address (transaction markers, for one): with different
    ports inside and out, transactions would never complete."""
    settings = {
        "node.id": "1",
        "controller.quorum.voters": "1@localhost:9093",
        "listeners": f"PLAINTEXT://:{port},CONTROLLER://:9093",
        "advertised.listeners": f"PLAINTEXT://{host}:{port}",
        **local_broker.SINGLE_NODE_SETTINGS,
        **overrides,
    }
    return kafka_env(settings, cluster_id="rmqkafkaadapterAAAAAA", heap="-Xmx768m -Xms256m")


def kafka_env(settings: dict[str, str], *, cluster_id: str, heap: str) -> dict[str, str]:
    """Server properties as the image's environment: ``a.b-c_d`` becomes ``KAFKA_A_B__C___D``."""
    env = {"CLUSTER_ID": cluster_id, "KAFKA_HEAP_OPTS": heap}
    for key, value in settings.items():
        name = key.replace("_", "___").replace("-", "__").replace(".", "_").upper()
        env[f"KAFKA_{name}"] = value
    return env


def built_image(name: str) -> str | None:
    """The tag ``infra/images.sh`` last built for ``name``, if any."""
    path = ROOT / "infra" / ".images" / name
    return path.read_text().strip() if path.exists() else None


def kafka_image() -> str:
    return os.environ.get("RMQ_TEST_KAFKA_IMAGE") or built_image("rmq-kafka") or OFFICIAL_IMAGE


class ContainerBroker:
    def __init__(self, overrides: Mapping[str, str]) -> None:
        from testcontainers.core.container import DockerContainer
        from testcontainers.core.wait_strategies import LogMessageWaitStrategy

        port = local_broker.free_port_pair()
        image = kafka_image()
        self.container = (
            DockerContainer(image)
            .with_envs(**container_env("127.0.0.1", port, overrides))
            .with_bind_ports(port, port)
            .with_kwargs(labels={TEST_LABEL: "kafka"})
            .waiting_for(LogMessageWaitStrategy("Kafka Server started").with_startup_timeout(120))
        )
        self.container.start()
        self.bootstrap = f"127.0.0.1:{port}"
        wait_until_ready(self.bootstrap)
        self.description = (
            f"testcontainers: {image} as container {self.container.get_container_id()[:12]} "
            f"at {self.bootstrap}"
        )

    def pause(self) -> None:
        self.container.get_wrapped_container().pause()

    def unpause(self) -> None:
        self.container.get_wrapped_container().unpause()

    def restart(self) -> None:
        self.down()
        self.up()

    def down(self) -> None:
        """Stop the container (SIGTERM, then SIGKILL after 30 s), keeping its address and data."""
        wrapped = self.container.get_wrapped_container()
        wrapped.stop(timeout=30)
        wrapped.wait(timeout=60)

    def up(self) -> None:
        self.container.get_wrapped_container().start()
        wait_until_ready(self.bootstrap)

    def stop(self) -> None:
        wrapped = self.container.get_wrapped_container()
        wrapped.reload()
        if wrapped.status == "paused":
            wrapped.unpause()
        self.container.stop()


@functools.cache
def engine_answers() -> bool:
    """A Docker-compatible engine (Docker, or podman's API service) answers on DOCKER_HOST."""
    try:
        import docker

        client = docker.from_env(timeout=5)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # noqa: BLE001 - any failure means "no engine"
        return False


def chosen_path() -> str:
    """``existing``, ``testcontainers`` or ``process``: where this run finds its broker."""
    if os.environ.get("KAFKA_BOOTSTRAP"):
        return "existing"
    wanted = os.environ.get("RMQ_TEST_KAFKA", "")
    if wanted not in ("", "testcontainers", "process"):
        raise pytest.UsageError(f"RMQ_TEST_KAFKA={wanted!r}: use testcontainers or process")
    if wanted == "testcontainers":
        if not engine_answers():
            raise pytest.UsageError(
                "RMQ_TEST_KAFKA=testcontainers but no container engine answers at "
                f"DOCKER_HOST={os.environ.get('DOCKER_HOST', '(unset)')}"
            )
        return "testcontainers"
    if wanted == "process":
        return "process"
    return "testcontainers" if engine_answers() else "process"


def start_broker(data_dir: Path, overrides: Mapping[str, str] | None = None) -> Broker:
    """A new broker on the chosen path (a fresh one each call, except for an existing cluster,
    which keeps its own settings), with ``overrides`` of the shared server properties."""
    path = chosen_path()
    if path == "existing":
        return ExistingCluster(os.environ["KAFKA_BOOTSTRAP"])
    if path == "testcontainers":
        return ContainerBroker(overrides or {})
    return LocalProcessBroker(data_dir, overrides or {})
