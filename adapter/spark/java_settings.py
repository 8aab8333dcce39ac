"""The adapter's Kafka client settings (librdkafka's names) as the Java client's, for Spark.

Not a RocketMQ behaviour: one set of ``RMQ_ADAPTER_KAFKA_*`` settings must reach every client
the product makes. The workers, the CLI and the Python clients use librdkafka, whose names
Spark's Kafka source (the Java client) does not know for SASL and TLS. This maps them:

- ``sasl.mechanisms`` -> ``sasl.mechanism``;
- ``sasl.username`` + ``sasl.password`` -> ``sasl.jaas.config`` (SCRAM's or PLAIN's login
  module, by the mechanism);
- ``ssl.ca.location`` -> ``ssl.truststore.location`` with ``ssl.truststore.type=PEM``;
- ``enable.ssl.certificate.verification=false`` -> no host name verification;
- ``ssl.endpoint.identification.algorithm=none`` -> the same, in Java's form.

Every other key passes through unchanged, and a Java name given directly (``sasl.jaas.config``,
``ssl.truststore.location``, ...) wins over a mapped one.

Known gaps: client certificates (``ssl.certificate.location`` / ``ssl.key.location``) and
OAUTHBEARER/GSSAPI are refused with the Java settings to use instead.
"""

from __future__ import annotations

from collections.abc import Mapping

from adapter.exceptions import ConfigError

LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
UNMAPPED = {
    "ssl.certificate.location": "ssl.keystore.location (type PEM, key and certificate in one file)",
    "ssl.key.location": "ssl.keystore.location (type PEM, key and certificate in one file)",
    "ssl.key.password": "ssl.key.password with ssl.keystore.location",
}


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def java_settings(librdkafka: Mapping[str, str]) -> dict[str, str]:
    """``librdkafka`` settings (keys without a ``kafka.`` prefix) as Java client settings.

    Raises:
        ConfigError: a setting with no Java equivalent here; the message names what to set.
    """
    settings = dict(librdkafka)
    java: dict[str, str] = {}
    mechanism = settings.pop("sasl.mechanisms", None) or settings.get("sasl.mechanism")
    if mechanism:
        java["sasl.mechanism"] = mechanism
    username, password = settings.pop("sasl.username", None), settings.pop("sasl.password", None)
    if username is not None or password is not None:
        module = LOGIN_MODULES.get((mechanism or "PLAIN").upper())
        if module is None or username is None or password is None:
            raise ConfigError(
                f"cannot pass SASL mechanism {mechanism} with a user name and password to "
                "Spark's Kafka source: set RMQ_ADAPTER_KAFKA_SASL_JAAS_CONFIG instead"
            )
        java["sasl.jaas.config"] = (
            f"{module} required username={_quoted(username)} password={_quoted(password)};"
        )
    ca = settings.pop("ssl.ca.location", None)
    if ca is not None:
        java["ssl.truststore.type"] = "PEM"
        java["ssl.truststore.location"] = ca
    verify = settings.pop("enable.ssl.certificate.verification", None)
    algorithm = settings.pop("ssl.endpoint.identification.algorithm", None)
    if (verify or "").lower() == "false" or (algorithm or "").lower() == "none":
        java["ssl.endpoint.identification.algorithm"] = ""
    elif algorithm is not None:
        java["ssl.endpoint.identification.algorithm"] = algorithm
    for key, instead in UNMAPPED.items():
        if key in settings and "ssl.keystore.location" not in settings:
            raise ConfigError(
                f"{key} has no equivalent for Spark's Kafka source here: set {instead} "
                "through RMQ_ADAPTER_KAFKA_* with the Java name"
            )
    return {**java, **settings}
