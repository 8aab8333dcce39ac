"""``ClientConfiguration`` and ``Credentials``: where Kafka is and who the client is.

Reproduces ``rocketmq.v5.client.ClientConfiguration(endpoints, credentials, namespace="",
request_timeout=3)`` and ``Credentials(ak="", sk="")`` of rocketmq-python-client 5.1, with the
same properties (``namespace``, ``credentials``, ``request_timeout``; ``ak``, ``sk``):

- ``endpoints`` are Kafka bootstrap servers, written as 5.x endpoints: ``host:port``, several
  separated by ``;`` (``,`` works too), each optionally prefixed ``http://`` or ``https://``
  (dropped, as the 5.x client drops it). An empty string means ``RMQ_ADAPTER_BOOTSTRAP``.
- ``Credentials(ak, sk)`` become Kafka SASL: ``sasl.username`` = ak, ``sasl.password`` = sk,
  mechanism ``SCRAM-SHA-512``, ``security.protocol`` ``SASL_PLAINTEXT`` (``SASL_SSL`` when
  the producer is built with ``tls_enable=True``). ``RMQ_ADAPTER_KAFKA_*`` settings win over
  all of these (``RMQ_ADAPTER_KAFKA_SASL_MECHANISM=PLAIN``). Empty credentials set no SASL.
- ``request_timeout`` (seconds) is the send timeout, retries included.
- ``namespace`` prefixes every topic and group the clients name, as RocketMQ does
  (``<namespace>%<topic>``, :func:`adapter.naming.with_namespace`); a received message's topic
  comes back without it, its namespace in ``Message.namespace``.

Known gaps: ak/sk are a SASL
login, not RocketMQ's request signature. ``rpc_endpoints`` (a gRPC address object) is not
provided; ``bootstrap_servers`` says where Kafka is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from adapter import naming
from adapter.config import KafkaSettings, NoBootstrapError
from adapter.exceptions import InvalidNameError
from adapter.v5.exception import IllegalArgumentException

__all__ = ["ClientConfiguration", "Credentials", "kafka_settings"]

DEFAULT_SASL_MECHANISM = "SCRAM-SHA-512"
_PREFIXES = ("http://", "https://")
# librdkafka spells some keys two ways; a user's setting under either name wins over ours.
_SAME_SETTING = {"sasl.mechanisms": ("sasl.mechanism", "sasl.mechanisms")}


class Credentials:
    """An access key and secret key; for Kafka, the SASL user name and password."""

    def __init__(self, ak: str | None = "", sk: str | None = "") -> None:
        self._ak = ak if ak is not None else ""
        self._sk = sk if sk is not None else ""

    @property
    def ak(self) -> str:
        return self._ak

    @property
    def sk(self) -> str:
        return self._sk

    def __repr__(self) -> str:
        return f"Credentials(ak={self._ak!r}, sk={'***' if self._sk else ''!r})"


def parse_endpoints(endpoints: str) -> str:
    """5.x endpoints (``a:8081;b:8081``, ``http://`` allowed) as Kafka bootstrap servers
    (``a:8081,b:8081``); ``IllegalArgumentException`` naming the bad address."""
    servers = []
    for raw in endpoints.replace(",", ";").split(";"):
        address = raw.strip()
        if not address:
            continue
        for prefix in _PREFIXES:
            if address.startswith(prefix):
                address = address[len(prefix) :]
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise IllegalArgumentException(
                f"endpoint {raw.strip()!r} is not host:port (endpoints {endpoints!r})"
            )
        servers.append(f"{host}:{port}")
    return ",".join(servers)


class ClientConfiguration:
    """Where Kafka is (``endpoints``), the login (``credentials``) and the request timeout."""

    def __init__(
        self,
        endpoints: str,
        credentials: Credentials | None,
        namespace: str = "",
        request_timeout: float = 3,
    ) -> None:
        if namespace:
            try:
                naming.check_namespace(namespace)
            except InvalidNameError as exc:
                raise IllegalArgumentException(str(exc)) from None
        if isinstance(request_timeout, bool) or not request_timeout > 0:
            raise IllegalArgumentException(
                f"request_timeout must be a positive number of seconds, got {request_timeout!r}"
            )
        self._bootstrap_servers = parse_endpoints(endpoints or "")
        self._credentials = credentials if credentials is not None else Credentials()
        self._namespace = namespace
        self._request_timeout = request_timeout

    @property
    def namespace(self) -> str:
        return self._namespace

    def named(self, name: str) -> str:
        """A topic or group name in this configuration's namespace (``<namespace>%<name>``,
        as RocketMQ names it); the name itself without a namespace."""
        return naming.with_namespace(self._namespace, name)

    @property
    def credentials(self) -> Credentials:
        return self._credentials

    @property
    def request_timeout(self) -> float:
        """Seconds; the send timeout, retries included."""
        return self._request_timeout

    @property
    def bootstrap_servers(self) -> str:
        """The Kafka bootstrap servers, ``,``-separated; empty means ``RMQ_ADAPTER_BOOTSTRAP``
        (adapter extension)."""
        return self._bootstrap_servers


def security_settings(credentials: Credentials, *, tls: bool) -> dict[str, str]:
    """The librdkafka settings of a login (and of TLS), before the user's overrides."""
    settings: dict[str, str] = {}
    if credentials.ak:
        settings["security.protocol"] = "SASL_SSL" if tls else "SASL_PLAINTEXT"
        settings["sasl.mechanisms"] = DEFAULT_SASL_MECHANISM
        settings["sasl.username"] = credentials.ak
        settings["sasl.password"] = credentials.sk
    elif tls:
        settings["security.protocol"] = "SSL"
    return settings


def kafka_settings(
    configuration: ClientConfiguration,
    *,
    tls: bool = False,
    environ: Mapping[str, str] | None = None,
) -> KafkaSettings:
    """The Kafka settings of a 5.x client: its endpoints and credentials, then every
    ``RMQ_ADAPTER_KAFKA_*`` setting of ``environ`` (the process environment by default)."""
    env = os.environ if environ is None else environ
    try:
        from_env = KafkaSettings.from_env(configuration.bootstrap_servers or None, env)
    except NoBootstrapError as exc:
        raise IllegalArgumentException(
            "no Kafka bootstrap servers: give ClientConfiguration endpoints "
            "('host:port;host:port') or set RMQ_ADAPTER_BOOTSTRAP"
        ) from exc
    ours = security_settings(configuration.credentials, tls=tls)
    for key, spellings in _SAME_SETTING.items():
        if any(name in from_env.extra for name in spellings):
            ours.pop(key, None)
    return KafkaSettings(from_env.bootstrap_servers, {**ours, **from_env.extra})
