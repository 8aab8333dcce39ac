"""ClientConfiguration and Credentials: endpoints become bootstrap servers, credentials SASL."""

from __future__ import annotations

import pytest

from adapter.v5 import ClientConfiguration, Credentials
from adapter.v5.client_configuration import kafka_settings
from adapter.v5.exception import IllegalArgumentException

pytestmark = pytest.mark.timeout(30)

NO_ENV: dict[str, str] = {}


def test_endpoints_separated_by_semicolons_become_comma_separated_bootstrap_servers() -> None:
    config = ClientConfiguration("a.example:9092;b.example:9093", Credentials())
    assert config.bootstrap_servers == "a.example:9092,b.example:9093"
    assert kafka_settings(config, environ=NO_ENV).bootstrap_servers == (
        "a.example:9092,b.example:9093"
    )


def test_an_http_prefix_is_dropped_as_the_5x_client_drops_it() -> None:
    config = ClientConfiguration("http://127.0.0.1:9092;https://[::1]:9093;", Credentials())
    assert config.bootstrap_servers == "127.0.0.1:9092,[::1]:9093"


@pytest.mark.parametrize("endpoints", ["127.0.0.1", "host:port", "host:0", ":9092"])
def test_an_endpoint_that_is_not_host_and_port_is_refused_by_name(endpoints: str) -> None:
    with pytest.raises(IllegalArgumentException, match="is not host:port"):
        ClientConfiguration(endpoints, Credentials())


def test_empty_endpoints_fall_back_to_the_bootstrap_environment_variable() -> None:
    config = ClientConfiguration("", Credentials())
    settings = kafka_settings(config, environ={"RMQ_ADAPTER_BOOTSTRAP": "k1:9092;k2:9092"})
    assert settings.bootstrap_servers == "k1:9092,k2:9092"


def test_no_endpoints_anywhere_is_a_clear_error() -> None:
    with pytest.raises(IllegalArgumentException, match="RMQ_ADAPTER_BOOTSTRAP"):
        kafka_settings(ClientConfiguration("", Credentials()), environ=NO_ENV)


def test_a_namespace_names_topics_and_groups_as_rocketmq_does() -> None:
    config = ClientConfiguration("127.0.0.1:9092", Credentials(), namespace="shop")
    assert config.namespace == "shop"
    assert config.named("Orders") == "shop%Orders"
    assert config.named("GID_orders") == "shop%GID_orders"
    assert ClientConfiguration("127.0.0.1:9092", Credentials()).named("Orders") == "Orders"


def test_a_namespace_rocketmq_would_refuse_is_refused() -> None:
    with pytest.raises(IllegalArgumentException, match="namespace"):
        ClientConfiguration("127.0.0.1:9092", Credentials(), namespace="shop A")


def test_the_default_namespace_and_request_timeout_are_those_of_5x() -> None:
    config = ClientConfiguration("127.0.0.1:9092", Credentials())
    assert config.namespace == ""
    assert config.request_timeout == 3


@pytest.mark.parametrize("timeout", [0, -1, True])
def test_a_request_timeout_that_is_not_positive_is_refused(timeout: float) -> None:
    with pytest.raises(IllegalArgumentException, match="request_timeout"):
        ClientConfiguration("127.0.0.1:9092", Credentials(), request_timeout=timeout)


def test_credentials_default_to_empty_and_treat_none_as_empty() -> None:
    assert (Credentials().ak, Credentials().sk) == ("", "")
    assert (Credentials(None, None).ak, Credentials(None, None).sk) == ("", "")
    assert "secret" not in repr(Credentials("user", "secret"))


def test_empty_credentials_set_no_kafka_security() -> None:
    config = ClientConfiguration("127.0.0.1:9092", Credentials())
    assert dict(kafka_settings(config, environ=NO_ENV).extra) == {}


def test_credentials_become_a_scram_sha_512_sasl_login() -> None:
    config = ClientConfiguration("127.0.0.1:9092", Credentials("alice", "s3cret"))
    assert dict(kafka_settings(config, environ=NO_ENV).extra) == {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "s3cret",
    }


def test_tls_turns_the_protocol_into_sasl_ssl_or_ssl_without_credentials() -> None:
    with_login = ClientConfiguration("127.0.0.1:9092", Credentials("alice", "s3cret"))
    without = ClientConfiguration("127.0.0.1:9092", Credentials())
    assert kafka_settings(with_login, tls=True, environ=NO_ENV).extra["security.protocol"] == (
        "SASL_SSL"
    )
    assert dict(kafka_settings(without, tls=True, environ=NO_ENV).extra) == {
        "security.protocol": "SSL"
    }


@pytest.mark.parametrize("variable", ["SASL_MECHANISM", "SASL_MECHANISMS"])
def test_the_environment_chooses_another_mechanism_under_either_spelling(variable: str) -> None:
    config = ClientConfiguration("127.0.0.1:9092", Credentials("alice", "s3cret"))
    extra = kafka_settings(config, environ={f"RMQ_ADAPTER_KAFKA_{variable}": "PLAIN"}).extra
    mechanisms = {key: value for key, value in extra.items() if key.startswith("sasl.mech")}
    assert mechanisms == {variable.lower().replace("_", "."): "PLAIN"}
    assert extra["sasl.username"] == "alice"


def test_the_environment_wins_over_the_credentials() -> None:
    config = ClientConfiguration("127.0.0.1:9092", Credentials("alice", "s3cret"))
    environ = {
        "RMQ_ADAPTER_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "RMQ_ADAPTER_KAFKA_SASL_USERNAME": "bob",
    }
    extra = kafka_settings(config, environ=environ).extra
    assert extra["security.protocol"] == "SASL_SSL"
    assert extra["sasl.username"] == "bob"
    assert extra["sasl.password"] == "s3cret"
