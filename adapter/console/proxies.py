"""The proxies the console was told of: each one's readiness and traffic, from its own probes.

As rocketmq-dashboard's proxy page, which lists the proxy addresses in its configuration, the
console lists the proxies given with ``--proxy HOST:PORT`` (each a proxy's ``--metrics-port``).
Proxies keep nothing in Kafka, so Kafka cannot list them. For each one the overview asks
``/readyz`` and reads ``/metrics``: the address clients call, the live client sessions, the
RPCs answered and how many of them failed, the messages sent.

Known gaps: the proxies are listed by hand; a proxy started later is not seen until it is given.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["ProxyState", "probe", "probe_all", "read_metrics"]

_OK = "OK"


@dataclass(frozen=True, slots=True)
class ProxyState:
    address: str
    """Where its metrics and probes are served (``--proxy``)."""
    status: str
    """``ready``, ``not ready``, or why it could not be reached."""
    endpoint: str = "-"
    sessions: int = 0
    rpcs: int = 0
    failed: int = 0
    messages: int = 0

    @property
    def ready(self) -> bool:
        return self.status == "ready"


def read_metrics(address: str, status: str, text: str) -> ProxyState:
    """A proxy's state from its ``/metrics`` page (Prometheus' text format)."""
    endpoint, sessions, rpcs, failed, messages = None, 0.0, 0.0, 0.0, 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "rmq_proxy_info":
                endpoint = sample.labels.get("endpoint", "-")
            elif sample.name == "rmq_proxy_sessions":
                sessions = sample.value
            elif sample.name == "rmq_proxy_rpcs_total":
                rpcs += sample.value
                failed += 0 if sample.labels.get("code") == _OK else sample.value
            elif sample.name == "rmq_proxy_messages_total":
                messages += sample.value
    if endpoint is None:
        return ProxyState(address, "not a proxy: no rmq_proxy_info in its metrics")
    return ProxyState(address, status, endpoint, int(sessions), int(rpcs), int(failed),
                      int(messages))  # fmt: skip


def _get(url: str, timeout_s: float) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as page:  # noqa: S310 - http only
            return int(page.status), page.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()


def probe(address: str, timeout_s: float) -> ProxyState:
    """One proxy's state; one that does not answer says why, and never raises."""
    base = f"http://{address}"
    try:
        code, _ = _get(base + "/readyz", timeout_s)
        status = "ready" if code == 200 else "not ready"
        code, text = _get(base + "/metrics", timeout_s)
    except (OSError, ValueError) as exc:
        return ProxyState(address, f"unreachable: {getattr(exc, 'reason', exc)}")
    if code != 200:
        return ProxyState(address, f"no metrics here (HTTP {code})")
    try:
        return read_metrics(address, status, text)
    except ValueError:  # not Prometheus' text format
        return ProxyState(address, "not a proxy: its /metrics does not parse")


def probe_all(addresses: tuple[str, ...], timeout_s: float) -> list[ProxyState]:
    """Every proxy's state, all probed at once."""
    if not addresses:
        return []
    with ThreadPoolExecutor(min(len(addresses), 8), thread_name_prefix="console-proxies") as pool:
        return list(pool.map(lambda a: probe(a, timeout_s), addresses))
