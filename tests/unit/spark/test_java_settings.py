"""The adapter's librdkafka settings reach Spark's Java Kafka source under Java's names."""

from __future__ import annotations

import pytest

from adapter.exceptions import ConfigError
from adapter.spark.config import kafka_options_from_env
from adapter.spark.java_settings import java_settings

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def test_scram_user_and_password_become_a_jaas_login() -> None:
    got = java_settings(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "app",
            "sasl.password": "s3cret",
        }
    )
    assert got == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": f'{SCRAM} required username="app" password="s3cret";',
    }


def test_plain_is_the_mechanism_when_none_is_named() -> None:
    got = java_settings({"sasl.username": "u", "sasl.password": "p"})
    assert got["sasl.jaas.config"].startswith("org.apache.kafka.common.security.plain.")


def test_quotes_and_backslashes_in_a_password_are_escaped() -> None:
    got = java_settings(
        {"sasl.mechanisms": "PLAIN", "sasl.username": "u", "sasl.password": 'a"b\\c'}
    )
    assert 'password="a\\"b\\\\c";' in got["sasl.jaas.config"]


def test_a_ca_file_becomes_a_pem_trust_store() -> None:
    got = java_settings({"ssl.ca.location": "/etc/ca.pem"})
    assert got == {"ssl.truststore.type": "PEM", "ssl.truststore.location": "/etc/ca.pem"}


def test_turning_verification_off_turns_host_name_checks_off() -> None:
    assert java_settings({"enable.ssl.certificate.verification": "false"}) == {
        "ssl.endpoint.identification.algorithm": ""
    }
    assert java_settings({"ssl.endpoint.identification.algorithm": "none"}) == {
        "ssl.endpoint.identification.algorithm": ""
    }


def test_a_java_name_given_directly_wins() -> None:
    got = java_settings(
        {"sasl.username": "u", "sasl.password": "p", "sasl.jaas.config": "Mine required;"}
    )
    assert got["sasl.jaas.config"] == "Mine required;"


def test_other_settings_pass_through() -> None:
    assert java_settings({"client.id": "x", "request.timeout.ms": "5000"}) == {
        "client.id": "x",
        "request.timeout.ms": "5000",
    }


def test_a_user_without_a_password_is_refused_with_what_to_set() -> None:
    with pytest.raises(ConfigError, match="RMQ_ADAPTER_KAFKA_SASL_JAAS_CONFIG"):
        java_settings({"sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": "u"})


def test_an_unknown_mechanism_with_a_password_is_refused() -> None:
    with pytest.raises(ConfigError, match="OAUTHBEARER"):
        java_settings(
            {"sasl.mechanisms": "OAUTHBEARER", "sasl.username": "u", "sasl.password": "p"}
        )


def test_a_client_certificate_is_refused_with_the_java_setting_to_use() -> None:
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location"):
        java_settings({"ssl.certificate.location": "/c.pem"})


def test_the_environment_reaches_the_source_options_under_java_names() -> None:
    options = kafka_options_from_env(
        {
            "RMQ_ADAPTER_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "RMQ_ADAPTER_KAFKA_SASL_MECHANISMS": "SCRAM-SHA-512",
            "RMQ_ADAPTER_KAFKA_SASL_USERNAME": "app",
            "RMQ_ADAPTER_KAFKA_SASL_PASSWORD": "pw",
            "RMQ_ADAPTER_KAFKA_SSL_CA_LOCATION": "/ca.pem",
        }
    )
    assert options["kafka.security.protocol"] == "SASL_SSL"
    assert options["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert options["kafka.ssl.truststore.location"] == "/ca.pem"
    assert 'username="app"' in options["kafka.sasl.jaas.config"]
