from __future__ import annotations

import pytest

from adapter.config import KafkaSettings
from adapter.consumer.config import ConsumerConfig, MessageModel
from adapter.exceptions import ConfigError
from adapter.kafka import clients
from adapter.producer.config import ProducerConfig
from adapter.schedule.config import ForwarderConfig
from adapter.transaction.group_commit import lane_settings
from adapter.transaction.timing import FAST_COMMIT_TRANSACTION_TIMEOUT_MS

pytestmark = pytest.mark.timeout(30)


def test_bootstrap_comes_from_the_code_first_then_the_environment() -> None:
    env = {"RMQ_ADAPTER_BOOTSTRAP": "env:9092"}
    assert KafkaSettings.from_env("code:9092", env).bootstrap_servers == "code:9092"
    assert KafkaSettings.from_env(None, env).bootstrap_servers == "env:9092"


def test_name_server_lists_separated_by_semicolons_become_kafka_lists() -> None:
    assert KafkaSettings.from_env("a:1; b:2", {}).bootstrap_servers == "a:1,b:2"


def test_missing_bootstrap_servers_are_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="set_name_server_address"):
        KafkaSettings.from_env(None, {})


def test_extra_librdkafka_settings_come_from_prefixed_variables() -> None:
    settings = KafkaSettings.from_env("a:1", {"RMQ_ADAPTER_KAFKA_SECURITY_PROTOCOL": "SSL"})
    conf = ProducerConfig(settings, "G").librdkafka()
    assert conf["security.protocol"] == "SSL"


def test_producer_defaults_are_rocketmqs() -> None:
    config = ProducerConfig(KafkaSettings("a:1"), "G")
    assert config.send_timeout_ms == 3000
    assert config.max_message_size == 4 * 1024 * 1024
    conf = config.librdkafka()
    assert conf["message.timeout.ms"] == 3000
    assert conf["enable.idempotence"] is True


def test_an_applications_producer_keeps_one_request_in_flight_so_no_retry_is_stored_twice() -> None:
    """librdkafka#4953: with several requests in flight, a leader change made the idempotent
    producer store batches twice (found by the chaos run)."""
    conf = ProducerConfig(KafkaSettings("a:1"), "G").librdkafka()
    assert conf["max.in.flight.requests.per.connection"] == 1
    with pytest.raises(ConfigError, match="stored once"):
        KafkaSettings("127.0.0.1:9", {"max.in.flight.requests.per.connection": "5"})


def test_the_fast_paths_producers_share_the_applications_settings_and_compression() -> None:
    settings = KafkaSettings.from_env("a:1", {"RMQ_ADAPTER_KAFKA_SECURITY_PROTOCOL": "SSL"})
    config = ProducerConfig(settings, "G", send_timeout_ms=5000, compress_level=6)
    conf = lane_settings(config, "rmq-adapter-fast-G-0")
    assert conf["transactional.id"] == conf["client.id"] == "rmq-adapter-fast-G-0"
    assert conf["security.protocol"] == "SSL"
    assert (conf["compression.codec"], conf["compression.level"]) == ("gzip", 6)
    assert conf["message.timeout.ms"] == 5000
    assert conf["transaction.timeout.ms"] == FAST_COMMIT_TRANSACTION_TIMEOUT_MS
    assert conf["message.max.bytes"] > config.librdkafka()["message.max.bytes"]


@pytest.mark.parametrize(
    "kwargs", [{"send_timeout_ms": 0}, {"max_message_size": -1}, {"compress_level": 10}]
)
def test_bad_producer_settings_are_refused(kwargs: dict[str, int]) -> None:
    with pytest.raises(ConfigError):
        ProducerConfig(KafkaSettings("a:1"), "G", **kwargs)


def test_broadcasting_consumers_keep_offsets_per_instance() -> None:
    config = ConsumerConfig(
        KafkaSettings("a:1"), "G", MessageModel.BROADCASTING, instance_name="i1"
    )
    assert config.librdkafka()["group.id"] == "G@i1"
    assert ConsumerConfig(KafkaSettings("a:1"), "G").librdkafka()["group.id"] == "G"


def test_a_new_cluster_id_never_starts_with_a_dash() -> None:
    from adapter.ops.broker import new_cluster_id

    ids = [new_cluster_id() for _ in range(2000)]
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)


@pytest.mark.parametrize("ahead", [-1, 1001])
def test_a_prepare_ahead_outside_0_to_1000_ms_is_refused(ahead: int) -> None:
    with pytest.raises(ConfigError, match="prepare-ahead must be 0 to 1000 ms"):
        ForwarderConfig(KafkaSettings("127.0.0.1:9092"), prepare_ahead_ms=ahead)


def test_variables_that_only_share_the_prefix_are_ignored_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Kubernetes injects RMQ_ADAPTER_KAFKA_PORT (and _SERVICE_HOST, ...) for a Service named
    # rmq-adapter-kafka; the product's own RMQ_ADAPTER_KAFKA_JARS shared the prefix too.
    env = {
        "RMQ_ADAPTER_KAFKA_PORT": "tcp://10.0.0.7:9092",
        "RMQ_ADAPTER_KAFKA_SERVICE_HOST": "10.0.0.7",
        "RMQ_ADAPTER_KAFKA_JARS": "/opt/kafka/libs",
        "RMQ_ADAPTER_KAFKA_LINGER_MS": "7",
        # A Java client's setting, for Spark's Kafka source: librdkafka refuses it.
        "RMQ_ADAPTER_KAFKA_SASL_JAAS_CONFIG": "org.apache.kafka...PlainLoginModule required;",
    }
    for _ in range(3):
        settings = KafkaSettings.from_env("127.0.0.1:9", env)
    assert dict(settings.extra) == {"linger.ms": "7"}
    producer = clients.producer(ProducerConfig(settings, "G").librdkafka())  # starts
    producer.flush(0)
    warned = [
        r.getMessage() for r in caplog.records if "not a librdkafka setting" in r.getMessage()
    ]
    assert len(warned) == 4, warned
    assert all(name in " ".join(warned) for name in env if not name.endswith("LINGER_MS"))


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("ISOLATION_LEVEL", "read_uncommitted"),
        ("ENABLE_AUTO_COMMIT", "true"),
        ("AUTO_COMMIT_ENABLE", "true"),
        ("ENABLE_AUTO_OFFSET_STORE", "true"),
        ("ENABLE_IDEMPOTENCE", "false"),
        ("TRANSACTIONAL_ID", "mine"),
        ("ACKS", "1"),
        ("GROUP_ID", "shared"),
    ],
)
def test_a_setting_exactly_once_depends_on_is_refused_at_start(variable: str, value: str) -> None:
    name = f"RMQ_ADAPTER_KAFKA_{variable}"
    with pytest.raises(ConfigError, match=f"{name}.*exactly-once"):
        KafkaSettings.from_env("127.0.0.1:9", {name: value})


def test_a_5x_client_refuses_such_a_setting_for_what_it_is_not_as_missing_servers() -> None:
    from adapter.v5 import ClientConfiguration, Credentials
    from adapter.v5.client_configuration import kafka_settings

    configuration = ClientConfiguration("127.0.0.1:9", Credentials())
    with pytest.raises(ConfigError, match="RMQ_ADAPTER_KAFKA_ISOLATION_LEVEL would override"):
        kafka_settings(configuration, environ={"RMQ_ADAPTER_KAFKA_ISOLATION_LEVEL": "x"})


def test_settings_given_in_code_may_not_override_exactly_once_either() -> None:
    with pytest.raises(ConfigError, match="'enable.idempotence'.*exactly-once"):
        KafkaSettings("127.0.0.1:9", {"enable.idempotence": "false"})


def test_no_config_object_shows_a_password_or_secret_in_its_repr() -> None:
    hidden = "s3cret-pw"
    settings = KafkaSettings(
        "127.0.0.1:9",
        {
            "sasl.password": hidden,
            "ssl.key.password": hidden,
            "sasl.oauthbearer.client.secret": hidden,
            "security.protocol": "SASL_SSL",
        },
    )
    for config in (settings, ProducerConfig(settings, "G"), ForwarderConfig(settings)):
        text = repr(config)
        assert hidden not in text, text
        assert "SASL_SSL" in text, "the rest is still shown"
