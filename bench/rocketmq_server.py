"""A real Apache RocketMQ 5.4.0 for bench/rocketmq.py: name server + proxy (Local mode) + mqadmin.

The jars come from Maven Central (``infra/rocketmq/pom.xml``, fetched into
``infra/.jars/rocketmq/`` by ``infra/rocketmq/fetch.sh``); the configuration is
``infra/rocketmq/conf/``. Each run gets a scratch folder under ``bench/.out/rocketmq/`` that is the
JVMs' ``user.home`` (the store and the logs go there) and holds the copy of ``conf/`` the JVMs run
on (``ROCKETMQ_HOME``): ``mqadmin updateBrokerConfig`` rewrites the broker's config file.

``rocketmq(config)`` starts the name server, then the proxy with its embedded broker, waits until
the broker has registered with the name server, and stops both JVMs by PID afterwards (SIGTERM,
then SIGKILL after a deadline), also when the body raised. Topics (each with its message type) and
consumer groups are created in batches with ``mqadmin updateTopicList`` / ``updateSubGroupList``
(one JVM each); ``set_broker_config`` runs ``mqadmin updateBrokerConfig`` on the running broker.

The name server and the broker's ports bind to 127.0.0.1 (``bindAddress``). Known gap: the proxy's
gRPC (8081) and remoting (8080) ports and the broker's HA port (10912) have no bind address
setting in 5.4.0 and listen on every interface; the benchmark's clients use 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parent.parent
HOME = ROOT / "infra" / "rocketmq"
JARS = ROOT / "infra" / ".jars" / "rocketmq"
OUT = ROOT / "bench" / ".out" / "rocketmq"
CLUSTER = "DefaultCluster"

# Heap sizes of the reference run (/work/shared/reference/rocketmq-anchor.md).
NAMESRV_JVM = ("-Xms256m", "-Xmx512m", "-XX:+UseG1GC")
PROXY_JVM = ("-Xms256m", "-Xmx1g", "-XX:+UseG1GC", "-XX:MaxDirectMemorySize=1g")
# mqadmin is a short-lived client: a small heap and the quick-start JIT.
TOOLS_JVM = ("-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")

log = logging.getLogger("bench.rocketmq")


class RocketMQError(RuntimeError):
    """RocketMQ did not start, stop or answer an mqadmin command in time."""


@dataclass(frozen=True, slots=True)
class Topic:
    name: str
    message_type: str  # NORMAL, TRANSACTION, DELAY or FIFO (mqadmin's +message.type)
    queues: int = 4


def _conf_value(path: Path, key: str) -> str:
    for line in path.read_text().splitlines():
        name, sep, value = line.partition("=")
        if sep and name.strip() == key:
            return value.strip()
    raise RocketMQError(f"{key} is not set in {path}")


@dataclass(frozen=True, slots=True)
class RocketMQConfig:
    """Where things are and how long to wait; the ports are those of ``conf/``."""

    run_dir: Path
    home: Path = HOME
    jars: Path = JARS
    start_timeout_s: float = 180.0
    stop_timeout_s: float = 45.0
    admin_timeout_s: float = 90.0

    @property
    def conf(self) -> Path:
        return self.home / "conf"

    @property
    def namesrv_port(self) -> int:
        return int(_conf_value(self.conf / "namesrv.conf", "listenPort"))

    @property
    def broker_port(self) -> int:
        return int(_conf_value(self.conf / "broker.conf", "listenPort"))

    @property
    def grpc_port(self) -> int:
        return int(json.loads((self.conf / "rmq-proxy.json").read_text())["grpcServerPort"])

    @property
    def ports(self) -> list[int]:
        """Every port the two JVMs listen on: the name server's, the broker's (and its VIP
        channel's and HA's), the proxy's gRPC and remoting ones."""
        proxy = json.loads((self.conf / "rmq-proxy.json").read_text())
        b = self.broker_port
        return [self.namesrv_port, b - 2, b, b + 1, self.grpc_port, proxy["remotingListenPort"]]

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def broker(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    @property
    def endpoints(self) -> str:
        """What the 5.x clients connect to: the proxy's gRPC port."""
        return f"127.0.0.1:{self.grpc_port}"


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


class _Jvm:
    """One JVM we started: its PID, its stdout/stderr file, and how to stop it."""

    def __init__(self, name: str, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.name = name
        self.out_path = cwd / f"{name}.out"
        self._out: IO[bytes] = self.out_path.open("wb")
        self.process = subprocess.Popen(  # noqa: S603 - fixed argv
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self._out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches us, and we stop it in order
        )
        log.debug("%s started, PID %d", name, self.process.pid)

    def output(self) -> str:
        return self.out_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout_s: float) -> None:
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                log.warning("%s (PID %d) ignored SIGTERM; killing it", self.name, self.process.pid)
                self.process.kill()
                self.process.wait(30)
        self._out.close()


class RocketMQ:
    """A running name server and proxy (Local mode, embedded broker); see the module docstring."""

    def __init__(self, config: RocketMQConfig) -> None:
        self.config = config
        self._jvms: list[_Jvm] = []
        # The JVMs run on a copy of conf/: updateBrokerConfig rewrites the broker's file.
        self.home = config.run_dir / "rocketmq-home"
        self.conf = self.home / "conf"
        self._env = {**os.environ, "ROCKETMQ_HOME": str(self.home)}

    @property
    def endpoints(self) -> str:
        return self.config.endpoints

    # -- start and stop -------------------------------------------------------------------

    def _java(self, jvm_options: Sequence[str], logback: str, main: str) -> list[str]:
        return [
            shutil.which("java") or "java",
            *jvm_options,
            f"-Duser.home={self.config.run_dir}",
            f"-Drmq.logback.configurationFile={self.conf / logback}",
            "-cp",
            f"{self.config.jars}/*",
            main,
        ]

    def _wait(self, jvm: _Jvm, what: str, ready: Callable[[], bool], deadline: float) -> None:
        while time.monotonic() < deadline:
            if ready():
                return
            if not jvm.alive():
                raise RocketMQError(
                    f"{jvm.name} exited with {jvm.process.returncode} before {what}:\n"
                    + "\n".join(jvm.output().splitlines()[-20:])
                )
            time.sleep(0.25)
        raise RocketMQError(f"{jvm.name}: no {what} within {self.config.start_timeout_s:.0f} s")

    def start(self) -> None:
        c = self.config
        if not (c.jars / ".pom.sha256").exists():
            raise RocketMQError(f"no RocketMQ jars in {c.jars}: run infra/rocketmq/fetch.sh")
        busy = [p for p in c.ports if _port_open(p)]
        if busy:
            raise RocketMQError(f"127.0.0.1 port(s) {busy} already in use: is a RocketMQ running?")
        c.run_dir.mkdir(parents=True, exist_ok=True)
        shutil.copytree(c.conf, self.conf, dirs_exist_ok=True)
        deadline = time.monotonic() + c.start_timeout_s
        started = time.monotonic()

        namesrv = self._spawn(
            "namesrv",
            [
                *self._java(
                    NAMESRV_JVM,
                    "rmq.namesrv.logback.xml",
                    "org.apache.rocketmq.namesrv.NamesrvStartup",
                ),
                "-c",
                str(self.conf / "namesrv.conf"),
            ],
        )
        self._wait(
            namesrv,
            "name server boot",
            lambda: "boot success" in namesrv.output() and _port_open(c.namesrv_port),
            deadline,
        )

        proxy = self._spawn(
            "proxy",
            [
                *self._java(
                    PROXY_JVM, "rmq.proxy.logback.xml", "org.apache.rocketmq.proxy.ProxyStartup"
                ),
                "-pm",
                "Local",
                "-pc",
                str(self.conf / "rmq-proxy.json"),
                "-bc",
                str(self.conf / "broker.conf"),
                "-n",
                c.namesrv,
            ],
        )
        proxy_log = c.run_dir / "logs" / "proxy.log"
        self._wait(
            proxy,
            "proxy start-up and broker registration",
            lambda: (
                "startup successfully" in proxy.output()
                and _port_open(c.grpc_port)
                and proxy_log.exists()
                and "Registering current broker to name server completed" in proxy_log.read_text()
            ),
            deadline,
        )
        log.info(
            "RocketMQ 5.4.0 up in %.0f s (name server %s, proxy %s, broker %s)",
            time.monotonic() - started,
            c.namesrv,
            c.endpoints,
            c.broker,
        )

    def _spawn(self, name: str, argv: list[str]) -> _Jvm:
        jvm = _Jvm(name, argv, self.config.run_dir, self._env)
        self._jvms.append(jvm)
        return jvm

    def stop(self) -> None:
        """Stop every JVM we started, the proxy first; by PID, with a deadline each."""
        while self._jvms:
            jvm = self._jvms.pop()
            try:
                jvm.stop(self.config.stop_timeout_s)
            except (OSError, subprocess.SubprocessError) as exc:  # the next one is stopped too
                log.error("could not stop %s (PID %d): %s", jvm.name, jvm.process.pid, exc)
            else:
                log.debug("%s stopped (exit code %s)", jvm.name, jvm.process.returncode)

    # -- mqadmin --------------------------------------------------------------------------

    def mqadmin(self, *args: str) -> str:
        """One ``mqadmin`` command against the running name server; its output."""
        argv = [
            *self._java(
                TOOLS_JVM,
                "rmq.tools.logback.xml",
                "org.apache.rocketmq.tools.command.MQAdminStartup",
            ),
            *args,
            "-n",
            self.config.namesrv,
        ]
        try:
            done = subprocess.run(  # noqa: S603 - fixed argv
                argv,
                cwd=self.config.run_dir,
                env=self._env,
                capture_output=True,
                text=True,
                timeout=self.config.admin_timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise RocketMQError(f"mqadmin {args[0]} took over {exc.timeout:.0f} s") from exc
        if done.returncode != 0 or "success" not in done.stdout:
            raise RocketMQError(
                f"mqadmin {' '.join(args)} failed ({done.returncode}):\n{done.stdout}{done.stderr}"
            )
        return done.stdout

    def create_topics(self, topics: Sequence[Topic]) -> None:
        """``mqadmin updateTopicList``: every topic with its message type, one JVM."""
        path = self.config.run_dir / "topics.json"
        path.write_text(
            json.dumps(
                [
                    {
                        "topicName": t.name,
                        "readQueueNums": t.queues,
                        "writeQueueNums": t.queues,
                        "perm": 6,  # read + write
                        "attributes": {"+message.type": t.message_type},
                    }
                    for t in topics
                ]
            )
        )
        self.mqadmin("updateTopicList", "-c", CLUSTER, "-f", str(path))

    def create_groups(self, groups: Sequence[str]) -> None:
        """``mqadmin updateSubGroupList``: every consumer group, one JVM."""
        path = self.config.run_dir / "groups.json"
        path.write_text(json.dumps([{"groupName": g} for g in groups]))
        self.mqadmin("updateSubGroupList", "-c", CLUSTER, "-f", str(path))

    def set_broker_config(self, key: str, value: str) -> None:
        """``mqadmin updateBrokerConfig`` on the running broker (e.g. transactionCheckInterval)."""
        self.mqadmin("updateBrokerConfig", "-b", self.config.broker, "-k", key, "-v", value)


@contextlib.contextmanager
def rocketmq(config: RocketMQConfig) -> Iterator[RocketMQ]:
    """A started RocketMQ, stopped afterwards whatever happens."""
    server = RocketMQ(config)
    try:
        server.start()
        yield server
    finally:
        server.stop()


def new_run_dir() -> Path:
    """A fresh scratch ``user.home`` under bench/.out/rocketmq/ (the previous ones are removed)."""
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("run-*"):
        shutil.rmtree(old, ignore_errors=True)
    path = OUT / f"run-{time.strftime('%Y%m%d-%H%M%S')}"
    path.mkdir()
    return path
