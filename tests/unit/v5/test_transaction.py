"""TransactionResolution, the checker's answers in the 2.0 protocol, and a Transaction's rules."""

from __future__ import annotations

import pytest

from adapter import properties as prop
from adapter.message import ReceivedMessage
from adapter.transaction.envelope import TransactionStatus
from adapter.v5 import Message, SendReceipt, Transaction, TransactionChecker, TransactionResolution
from adapter.v5.exception import ClientException, IllegalArgumentException, IllegalStateException
from adapter.v5.send_receipt import MessageQueue
from adapter.v5.transaction import CheckAnswers, status_of

pytestmark = pytest.mark.timeout(30)


def test_resolutions_have_the_protocol_members_values_and_lookups() -> None:
    assert [(r.name, int(r)) for r in TransactionResolution] == [
        ("TRANSACTION_RESOLUTION_UNSPECIFIED", 0),
        ("COMMIT", 1),
        ("ROLLBACK", 2),
    ]
    assert TransactionResolution.Name(1) == "COMMIT"
    assert TransactionResolution.Value("ROLLBACK") == 2


def test_commit_and_rollback_map_onto_the_2_0_statuses_by_meaning_not_by_number() -> None:
    # TransactionResolution.COMMIT is 1, which is TransactionStatus.ROLLBACK's number.
    assert status_of(TransactionResolution.COMMIT) is TransactionStatus.COMMIT
    assert status_of(TransactionResolution.ROLLBACK) is TransactionStatus.ROLLBACK
    assert status_of(1) is TransactionStatus.COMMIT  # the protobuf enum's plain int


@pytest.mark.parametrize(
    "answer", [TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED, None, True, "COMMIT", 7]
)
def test_any_other_answer_leaves_the_message_to_the_next_check(answer: object) -> None:
    assert status_of(answer) is TransactionStatus.UNKNOWN


class Recording(TransactionChecker):
    def __init__(self, answer: TransactionResolution) -> None:
        self.answer = answer
        self.seen: list[Message] = []

    def check(self, message: Message) -> TransactionResolution:
        self.seen.append(message)
        return self.answer


def test_a_check_back_asks_the_checker_with_the_5x_view_of_the_half_message() -> None:
    checker = Recording(TransactionResolution.COMMIT)
    received = ReceivedMessage(
        topic="Payments",
        kafka_topic=".25CHECK.25Payments",
        body=b"pay 30",
        queue_id=0,
        queue_offset=5,
        timestamp=0,
        append_time=False,
        headers=[
            (prop.UNIQ_KEY, b"TXID"),
            (prop.TAGS, b"Paid"),
            ("amount", b"30"),
            (prop.TRANSACTION_CHECK_TIMES, b"1"),
        ],
    )
    assert CheckAnswers(checker)(received) is TransactionStatus.COMMIT
    [seen] = checker.seen
    assert (seen.topic, seen.message_id, seen.tag) == ("Payments", "TXID", "Paid")
    assert seen.properties == {"amount": "30"}


def test_a_checker_is_abstract() -> None:
    with pytest.raises(TypeError):
        TransactionChecker()  # type: ignore[abstract]


def sent(message_id: str) -> SendReceipt:
    return SendReceipt(message_id, message_id, MessageQueue("RMQ_SYS_TRANS_HALF_TOPIC", 0), 3)


def test_a_transaction_holds_one_message() -> None:
    transaction = Transaction(producer=None)  # type: ignore[arg-type]
    first, second = Message(), Message()
    transaction.add_half_message(first)
    with pytest.raises(IllegalArgumentException, match="already existed"):
        transaction.add_half_message(second)


def test_a_receipt_must_belong_to_the_transactions_message() -> None:
    transaction = Transaction(producer=None)  # type: ignore[arg-type]
    with pytest.raises(IllegalArgumentException, match="no message"):
        transaction.add_send_receipt(sent("A"))
    message = Message()
    message.message_id = "A"
    transaction.add_half_message(message)
    with pytest.raises(IllegalArgumentException, match="another send receipt"):
        transaction.add_send_receipt(sent("B"))
    transaction.add_send_receipt(sent("A"))
    assert transaction.message_id == "A"


def test_a_transaction_without_a_sent_message_cannot_end() -> None:
    transaction = Transaction(producer=None)  # type: ignore[arg-type]
    with pytest.raises(IllegalArgumentException, match="no message in transaction"):
        transaction.commit()
    transaction.add_half_message(Message())
    with pytest.raises(IllegalArgumentException, match="must send half message"):
        transaction.rollback()


class TimesOutOnce:
    """A producer whose first end-transaction call fails as a timeout does: the decision may
    or may not have reached Kafka."""

    def __init__(self) -> None:
        self.sent: list[TransactionResolution] = []

    def end_transaction(self, transaction_id: str, resolution: TransactionResolution) -> None:
        assert transaction_id == "A"
        self.sent.append(resolution)
        if len(self.sent) == 1:
            raise ClientException("timed out waiting for Kafka's acknowledgement")


def sent_transaction(producer: TimesOutOnce) -> Transaction:
    transaction = Transaction(producer=producer)
    message = Message()
    message.message_id = "A"
    transaction.add_half_message(message)
    transaction.add_send_receipt(sent("A"))
    return transaction


def test_a_commit_whose_outcome_is_unknown_cannot_be_followed_by_a_rollback() -> None:
    producer = TimesOutOnce()
    transaction = sent_transaction(producer)
    with pytest.raises(ClientException, match="timed out"):
        transaction.commit()
    with pytest.raises(IllegalStateException, match="outcome is unknown"):
        transaction.rollback()
    assert producer.sent == [TransactionResolution.COMMIT], "no contradicting decision is sent"


def test_a_commit_whose_outcome_is_unknown_may_be_sent_again() -> None:
    producer = TimesOutOnce()
    transaction = sent_transaction(producer)
    with pytest.raises(ClientException):
        transaction.commit()
    transaction.commit()
    assert producer.sent == [TransactionResolution.COMMIT, TransactionResolution.COMMIT]
    with pytest.raises(IllegalStateException, match="already ended"):
        transaction.commit()
