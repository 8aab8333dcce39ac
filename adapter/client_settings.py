"""The setters that ``Producer`` and ``PushConsumer`` share in rocketmq-client-python 2.0.

Reproduces ``set_group``, ``set_instance_name``, ``set_name_server_address`` (here: Kafka
bootstrap servers), and the setters that have no Kafka meaning, which are accepted and
ignored with a log line so that unchanged application code keeps running.

Known gaps: ``set_session_credentials`` does not configure Kafka security; use the
``RMQ_ADAPTER_KAFKA_*`` environment variables (see :mod:`adapter.config`).
"""

from __future__ import annotations

import logging
from types import TracebackType
from typing import Self

log = logging.getLogger(__name__)


class ClientSettings:
    """Name, group and address of a client; subclasses read them at ``start()``. A client is
    also a context manager: ``with Producer(...) as p`` starts it and shuts it down."""

    _group: str
    _instance_name: str = "DEFAULT"
    _bootstrap: str | None = None

    def start(self) -> None:
        raise NotImplementedError

    def shutdown(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()

    def set_group(self, group_name: str) -> None:
        self._group = group_name

    def set_instance_name(self, name: str) -> None:
        self._instance_name = name

    def set_name_server_address(self, addr: str) -> None:
        """Kafka bootstrap servers (``host:port``, several separated by ``,`` or ``;``)."""
        self._bootstrap = addr

    def set_name_server_domain(self, domain: str) -> None:
        log.warning("set_name_server_domain has no Kafka meaning and is ignored: %s", domain)

    def set_session_credentials(self, access_key: str, access_secret: str, channel: str) -> None:
        log.warning(
            "set_session_credentials is ignored; configure Kafka security with "
            "RMQ_ADAPTER_KAFKA_* settings (channel %s)",
            channel,
        )

    def set_message_trace(self, message_trace: bool) -> None:
        log.debug("message trace is not supported; ignored (%s)", message_trace)
