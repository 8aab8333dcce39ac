"""A local single-node Apache Kafka broker (KRaft) for development, demos and tests.

Not a RocketMQ behaviour: this stands in for the RocketMQ broker + name server a developer
would run locally. It runs the official Kafka jars from Maven Central in the background on
127.0.0.1, as one combined broker/controller node whose offsets topic and transaction state
log have replication factor 1, so consumer groups and Kafka transactions work on one node.

The jars, first found wins: ``--jars-dir`` (``jars_dir``), ``RMQ_ADAPTER_BROKER_JARS``, a
checkout's ``infra/.jars/kafka`` (``make jars``), else the user cache, which the first start
fills from Maven Central with the jars ``kafka-jars.lock`` pins (:mod:`adapter.jars`).

Defaults chosen to match a RocketMQ developer broker: topics are created on first use with 4
partitions (``autoCreateTopicEnable`` / ``defaultTopicQueueNums=4``), retention is 72 hours
(``fileReservedTime``), and messages up to 4 MiB plus headers are accepted.

Known gaps: one node only (no replication, no fail-over).
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

import tenacity

from adapter import jars
from adapter.exceptions import BrokerError, KafkaUnavailableError
from adapter.kafka import clients
from adapter.ops.broker_jars import (  # re-exported: the broker's jars are part of its API
    ENV_JARS,
    OLD_ENV_JARS,
    default_jars_dir,
    jar_lock,
    jars_dir,
    repo_root,
)

__all__ = [
    "ENV_JARS",
    "OLD_ENV_JARS",
    "BrokerConfig",
    "default_jars_dir",
    "free_port_pair",
    "jar_lock",
    "jars_dir",
    "repo_root",
    "start",
    "stop",
]

log = logging.getLogger(__name__)

DEFAULT_PORT = 9092
PID_FILE = "broker.pid"
ADDRESS_FILE = "broker.address"
LOG_FILE = "broker.log"

_LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = info
rootLogger.appenderRef.out.ref = out
logger.kafka.name = kafka
logger.kafka.level = info
logger.state.name = state.change.logger
logger.state.level = warn
logger.request.name = kafka.request.logger
logger.request.level = warn
"""


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    data_dir: Path
    port: int = DEFAULT_PORT
    controller_port: int | None = None
    jars_dir: Path | None = None
    """None: :func:`jars_dir` chooses (and fetches) them."""
    heap: str = "768m"
    start_timeout_s: float = 90.0
    overrides: tuple[tuple[str, str], ...] = ()
    """Server properties that replace the shared ones (``SINGLE_NODE_SETTINGS``)."""

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def controller(self) -> int:
        return self.controller_port or self.port + 1

    def settings(self) -> dict[str, str]:
        """The server properties of this node: its listeners and data, then the shared ones."""
        return {
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str((self.data_dir / "logs").resolve()),
            **SINGLE_NODE_SETTINGS,
            **dict(self.overrides),
        }

    def server_properties(self) -> str:
        return "".join(f"{key}={value}\n" for key, value in self.settings().items())


# Everything but the node's addresses and data directory: one combined broker/controller
# whose internal topics have replication factor 1, with RocketMQ's developer defaults.
# The container images used by the tests are configured from the same mapping.
SINGLE_NODE_SETTINGS: dict[str, str] = {
    "process.roles": "broker,controller",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
    "num.partitions": "4",
    "auto.create.topics.enable": "true",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "8",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "8",
    # A producer that died inside a Kafka transaction holds back what read_committed readers
    # see until the broker aborts it; check for such transactions every second, not every 10.
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    # A share consumer gets its partitions one heartbeat after it joins: 1 s, not 5 s, so a
    # 5.x consumer started a moment before a message is due receives it on time.
    "group.share.min.heartbeat.interval.ms": "1000",
    "group.share.heartbeat.interval.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
    "message.max.bytes": str(5 * 1024 * 1024),
    "log.retention.hours": "72",
}


def new_cluster_id() -> str:
    """A random cluster id in Kafka's form (URL-safe base64 of 16 bytes), never starting with
    '-': the storage tool would read such an id as an option, as Kafka's own Uuid avoids."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ephemeral_ports() -> range:
    """The range the kernel picks client ports from (Linux; a common default elsewhere)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return range(int(low), int(high) + 1)
    except (OSError, ValueError):
        return range(32768, 61000)


def free_port_pair() -> int:
    """A free port N on 127.0.0.1 whose neighbour N+1 (the controller port) is free too,
    outside the kernel's range of client ports: while a broker is down, its clients keep
    connecting to its port, and a client port that happens to equal it (TCP's self-connect)
    would hold the port when the broker comes back."""
    ephemeral = _ephemeral_ports()
    candidates = [
        p for p in range(20000, 32000, 2) if p not in ephemeral and p + 1 not in ephemeral
    ]
    random.shuffle(candidates)
    for port in candidates[:200]:
        if _port_is_free(port) and _port_is_free(port + 1):
            return port
    raise BrokerError("no free pair of ports on 127.0.0.1")


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); reap it if it is ours.
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    return True


def read_pid(data_dir: Path) -> int | None:
    try:
        return int((data_dir / PID_FILE).read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def _command_line(pid: int) -> str | None:
    """The command line of process ``pid`` (Linux's /proc, else ``ps``); None if unknown."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        return raw.replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        pass
    try:
        shown = subprocess.run(  # noqa: S603 - fixed argv, no shell
            ["ps", "-o", "args=", "-p", str(pid)],  # noqa: S607 - ps from the PATH
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return shown.stdout if shown.returncode == 0 else None


def running_pid(data_dir: Path) -> int | None:
    """The PID of the broker started from ``data_dir`` while it runs; None otherwise. A PID
    file outlives its broker, and the system may give its PID to another process: only a
    process running Kafka on this directory's ``server.properties`` counts."""
    pid = read_pid(data_dir)
    if pid is None or not _alive(pid):
        return None
    command = _command_line(pid)
    properties = data_dir / "server.properties"
    if command is None:
        raise BrokerError(f"cannot tell whether process {pid} (from {PID_FILE}) is the broker")
    ours = "kafka.Kafka" in command and (
        str(properties.resolve()) in command or str(properties) in command
    )
    return pid if ours else None


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise BrokerError(
            "Java is missing: install a Java 17+ runtime (apt-get install openjdk-17-jre-headless)"
        )
    return java


def _classpath(directory: Path) -> str:
    if not directory.is_dir() or not any(directory.glob("kafka_2.13-*.jar")):
        raise BrokerError(
            f"the Kafka jars are not in {directory}: leave out --jars-dir and {ENV_JARS} to "
            "fetch them into the user cache, or run `make jars` in a checkout"
        )
    return str(directory / "*")


def start(config: BrokerConfig, progress: jars.TextProgress | None = None) -> str:
    """Start the broker in the background; return its address once it accepts connections.
    Jars the user cache lacks are fetched first, reported to ``progress`` (else logged)."""
    data_dir = config.data_dir
    data_dir.mkdir(parents=True, exist_ok=True)
    pid = running_pid(data_dir)
    if pid is not None:
        address = (data_dir / ADDRESS_FILE).read_text().strip()
        raise BrokerError(f"a broker already runs from {data_dir} (pid {pid}) at {address}")
    java = _java()
    for port in (config.port, config.controller):
        if not _port_is_free(port):
            raise BrokerError(f"port {port} on 127.0.0.1 is taken; choose another with --port")
    classpath = _classpath(jars_dir(config.jars_dir, progress=progress))

    properties = data_dir / "server.properties"
    properties.write_text(config.server_properties())
    log4j = data_dir / "log4j2.properties"
    log4j.write_text(_LOG4J2)
    jvm = [
        java,
        f"-Xmx{config.heap}",
        "-Xms128m",
        "-XX:+UseG1GC",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={log4j.resolve()}",
        "-cp",
        classpath,
    ]
    if not (data_dir / "logs" / "meta.properties").exists():
        cid = new_cluster_id()
        formatted = subprocess.run(  # noqa: S603 - fixed argv, no shell
            [*jvm, "kafka.tools.StorageTool", "format", "-t", cid, "-c", str(properties)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if formatted.returncode != 0:
            raise BrokerError(
                f"formatting the KRaft storage failed:\n{formatted.stderr or formatted.stdout}"
            )

    log_path = data_dir / LOG_FILE
    with open(log_path, "ab") as out:
        process = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
            [*jvm, "kafka.Kafka", str(properties.resolve())],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    (data_dir / PID_FILE).write_text(str(process.pid))
    (data_dir / ADDRESS_FILE).write_text(config.bootstrap)

    def ready() -> bool:
        if process.poll() is not None:
            raise BrokerError(
                f"the broker exited with code {process.returncode} while starting; "
                f"last lines of {log_path}:\n{_tail(log_path)}"
            )
        return _accepts(config.port) and is_ready(config.bootstrap)

    try:
        tenacity.Retrying(
            retry=tenacity.retry_if_result(lambda answered: not answered),
            wait=tenacity.wait_fixed(0.25),
            stop=tenacity.stop_after_delay(config.start_timeout_s),
        )(ready)
    except BrokerError:
        (data_dir / PID_FILE).unlink(missing_ok=True)
        raise
    except tenacity.RetryError:
        _kill(process.pid, timeout_s=10)
        (data_dir / PID_FILE).unlink(missing_ok=True)
        raise BrokerError(
            f"the broker did not accept connections within {config.start_timeout_s:.0f} s; "
            f"last lines of {log_path}:\n{_tail(log_path)}"
        ) from None
    return config.bootstrap


def is_ready(bootstrap: str) -> bool:
    """The broker answers metadata requests (it has registered with its controller)."""
    try:
        clients.reach({"bootstrap.servers": bootstrap}, 2)
    except KafkaUnavailableError:
        return False
    return True


def _wait_gone(pid: int, timeout_s: float) -> bool:
    """Whether process ``pid`` ended within ``timeout_s``."""
    try:
        tenacity.Retrying(
            retry=tenacity.retry_if_result(bool),
            wait=tenacity.wait_fixed(0.2),
            stop=tenacity.stop_after_delay(timeout_s),
        )(lambda: _alive(pid))
    except tenacity.RetryError:
        return False
    return True


def _kill(pid: int, *, timeout_s: float) -> None:
    """SIGTERM, then SIGKILL if the process has not ended within ``timeout_s``."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    if _wait_gone(pid, timeout_s):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    _wait_gone(pid, 10)


def stop(data_dir: Path, timeout_s: float = 30.0) -> bool:
    """Stop the broker started from ``data_dir``; False when none was running (its PID file,
    if any, is removed; a process that reused its PID is left alone)."""
    pid = running_pid(data_dir)
    if pid is not None:
        _kill(pid, timeout_s=timeout_s)
    (data_dir / PID_FILE).unlink(missing_ok=True)
    return pid is not None
