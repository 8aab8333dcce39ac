"""``rmq-adapter transactions resume`` on what the coordinator parked: a half message as large as
the half topic takes, and forged records in the discard log, which get one clear error line.

On a broker of the module's own: a resumed message is a pending half message, which the
coordinators of other tests would go on checking.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from confluent_kafka import TopicPartition

from adapter import naming
from adapter import properties as prop
from adapter.delay import DelayLevels
from adapter.kafka import clients
from adapter.ops.cli import main as cli
from adapter.transaction import admin
from adapter.wire import codec
from adapter.wire.records import HalfMessage
from tests.brokers import Broker
from tests.support import init_system_topics, unique

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]

HALF = naming.kafka_topic(naming.TRANS_HALF_TOPIC)
DISCARDED = naming.kafka_topic(naming.TRANS_CHECK_MAX_TIME_TOPIC)
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def bootstrap(own_kafka: Broker) -> str:
    init_system_topics(own_kafka.bootstrap, DelayLevels.parse())
    return own_kafka.bootstrap


def half(transaction_id: str, body: bytes) -> HalfMessage:
    return HalfMessage(
        transaction_id=transaction_id,
        producer_group=unique("PG"),
        topic=unique("Topic"),
        queue_id=-1,
        tags=None,
        keys=None,
        properties={prop.UNIQ_KEY: transaction_id},
        body=body,
        born_timestamp=1_700_000_000_000,
    )


def write_discard_log(bootstrap: str, key: str, value: bytes, headers: list) -> None:  # type: ignore[type-arg]
    """A record of TRANS_CHECK_MAX_TIME_TOPIC, as the coordinator (or a forger) writes it."""
    producer = clients.producer({"bootstrap.servers": bootstrap, "message.max.bytes": 6 * MIB})
    producer.produce(DISCARDED, value, key=key.encode(), headers=headers)
    assert producer.flush(30) == 0


def park(bootstrap: str, message: HalfMessage) -> None:
    headers = [("reason", b"checked 15 times"), (prop.TRANSACTION_CHECK_TIMES, b"15")]
    write_discard_log(bootstrap, message.transaction_id, codec.encode(message), headers)


def resume(bootstrap: str, transaction_id: str) -> tuple[int, str, BaseException | None]:
    done = CliRunner().invoke(
        cli, ["transactions", "resume", "--bootstrap", bootstrap, transaction_id]
    )
    return done.exit_code, done.output, done.exception


def test_a_discarded_message_of_three_mebibytes_is_resumed(bootstrap: str) -> None:
    # Half messages may be up to 4 MiB (RocketMQ's limit); librdkafka's default is 1 MB.
    tid, body = unique("TX"), b"x" * (3 * MIB)
    park(bootstrap, half(tid, body))
    code, output, _ = resume(bootstrap, tid)
    assert code == 0, output
    where = output.strip().rsplit(" ", 1)[-1]
    partition, offset = (int(n) for n in where.split("@"))
    reader = clients.consumer({"bootstrap.servers": bootstrap, "group.id": unique("read")})
    try:
        reader.assign([TopicPartition(HALF, partition, offset)])
        record = reader.poll(30)
    finally:
        reader.close()
    assert record is not None
    assert record.error() is None
    assert codec.decode_as(HalfMessage, record.value()).body == body


@pytest.mark.parametrize(
    "headers",
    [
        [(admin.EVENT, admin.RESUMED), (admin.RESUMED_AT, b"yesterday")],
        [(admin.EVENT, admin.RESUMED), (admin.RESUMED_AT, b"9" * 30)],
        [(admin.EVENT, admin.RESUMED), (admin.RESUMED_AT, b"1"), (admin.RESUMED_AS, b"\xff\xfe")],
    ],
)
def test_a_forged_resumed_marker_gets_one_clear_error_line(
    bootstrap: str, headers: list[tuple[str, bytes]]
) -> None:
    tid = unique("TX")
    park(bootstrap, half(tid, b"small"))
    write_discard_log(bootstrap, tid, b"", headers)
    code, output, exception = resume(bootstrap, tid)
    assert code == 1
    assert isinstance(exception, SystemExit), f"not a traceback: {exception!r}"
    [line] = output.strip().splitlines()
    assert line.startswith(f"Error: {naming.TRANS_CHECK_MAX_TIME_TOPIC} offset "), line
    assert tid in line


@pytest.mark.parametrize(
    "headers",
    [
        [(admin.EVENT, admin.RESUMED), (admin.RESUMED_AT, b"yesterday")],
        [(admin.EVENT, admin.RESUMED), (admin.RESUMED_AT, b"1"), (admin.RESUMED_AS, b"\xff\xfe")],
    ],
)
def test_listing_skips_a_forged_resumed_marker_with_one_line_and_lists_the_rest(
    bootstrap: str, headers: list[tuple[str, bytes]]
) -> None:
    tid = unique("TX")
    park(bootstrap, half(tid, b"small"))
    write_discard_log(bootstrap, tid, b"", headers)
    listed = CliRunner().invoke(
        cli, ["transactions", "list", "--discarded", "--bootstrap", bootstrap]
    )
    assert listed.exit_code == 0, listed.output
    [row] = [line for line in listed.stdout.splitlines() if tid in line]
    assert " - " in row, "listed, and not as resumed"
    skipped = [line for line in listed.stderr.splitlines() if tid in line]
    assert len(skipped) == 1, listed.stderr
    assert skipped[0].startswith(f"skipped {naming.TRANS_CHECK_MAX_TIME_TOPIC} offset "), skipped


def test_listing_skips_a_discarded_message_whose_check_count_is_not_a_count(bootstrap: str) -> None:
    tid = unique("TX")
    message = half(tid, b"small")
    headers = [("reason", b"checked 15 times"), (prop.TRANSACTION_CHECK_TIMES, b"many")]
    write_discard_log(bootstrap, tid, codec.encode(message), headers)
    listed = CliRunner().invoke(
        cli, ["transactions", "list", "--discarded", "--bootstrap", bootstrap]
    )
    assert listed.exit_code == 0, listed.output
    assert tid not in listed.stdout
    [skipped] = [line for line in listed.stderr.splitlines() if tid in line]
    assert "is not a count" in skipped
