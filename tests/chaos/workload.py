"""The clients of a chaos run, each recording into one history.

Senders, each paced and each message unique (its body is its key):
- ``s-N`` normal sends (2.0 ``Producer.send_sync``);
- ``t-N`` transactions (2.0 ``TransactionMQProducer``): every third commits, every third rolls
  back, every third answers UNKNOWN and the check-back decides by parity;
- ``d-N`` delayed sends at levels 1 and 4 (1 s and 2 s with the run's levels);
- ``m-N`` timers (5.x ``Producer``, delivery timestamp 1-4 s ahead); every eighth is 4 s ahead
  and recalled at once: never delivered if the recall succeeded, delivered if it was refused
  (delivered already), either if it raised;
- ``f-G-N`` FIFO sends (2.0 ``send_orderly_with_sharding_key``), five message groups.

Receivers: a 2.0 ``PushConsumer`` and a 5.x ``SimpleConsumer`` on the main topic, a 2.0 orderly
``PushConsumer`` on the FIFO topic. A send that raised is ``UNKNOWN`` (it may have reached
Kafka); the checker accepts it delivered or not.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from adapter import v5
from adapter.client import (
    ConsumeStatus,
    Message,
    Producer,
    PushConsumer,
    TransactionMQProducer,
    TransactionStatus,
)
from tests.chaos.history import Delivery, History, Kind, Operation, Outcome
from tests.support import unique

log = logging.getLogger("chaos")

PACE_S = {"s": 0.05, "t": 0.1, "d": 0.1, "m": 0.1, "f": 0.05}
"""Seconds between two sends of each sender (all five together: about 90 messages a second)."""
DELAYS_S = {1: 1.0, 4: 2.0}
"""The delay levels used and their delays under the run's ``1s 1s 1s 2s``."""
FIFO_GROUPS = 5
RECALLED = 3
"""Timers whose number is this modulo 8 (4 s ahead) are recalled right after their send."""
CONSUMERS = ("push", "simple", "fifo")


def decision(n: int) -> TransactionStatus:
    return (TransactionStatus.COMMIT, TransactionStatus.ROLLBACK, TransactionStatus.UNKNOWN)[n % 3]


def check_answer(msg: Any) -> TransactionStatus:
    """What the application's check-back says: its local decision when it made one (an END
    record a fault cut off is asked for again), else commit the even ones."""
    n = int(bytes(msg.body).decode().split("-")[1])
    status = decision(n)
    if status is not TransactionStatus.UNKNOWN:
        return status
    return TransactionStatus.COMMIT if n % 2 == 0 else TransactionStatus.ROLLBACK


def committed(n: int) -> bool:
    status = decision(n)
    return status is TransactionStatus.COMMIT or (
        status is TransactionStatus.UNKNOWN and n % 2 == 0
    )


class Workload:
    def __init__(self, bootstrap: str, topic: str, fifo_topic: str, history: History) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.fifo_topic = fifo_topic
        self.history = history
        self._stop = threading.Event()
        self._closing = threading.Event()
        self._senders: list[threading.Thread] = []
        self._receivers: list[threading.Thread] = []
        self._closers: list[Callable[[], None]] = []

    # -- start and stop -------------------------------------------------------------------------

    def start_consumers(self) -> None:
        push = PushConsumer(unique("ChaosPush"))
        push.set_name_server_address(self.bootstrap)
        push.subscribe(self.topic, self._recorder("push"))
        push.start()
        self._closers.append(push.shutdown)
        fifo = PushConsumer(unique("ChaosFifo"), orderly=True)
        fifo.set_name_server_address(self.bootstrap)
        fifo.subscribe(self.fifo_topic, self._recorder("fifo"))
        fifo.start()
        self._closers.append(fifo.shutdown)
        config = v5.ClientConfiguration(self.bootstrap, v5.Credentials())
        simple = v5.SimpleConsumer(
            config, unique("ChaosSimple"), {self.topic: v5.FilterExpression()}, await_duration=2
        )
        simple.startup()
        self._closers.append(simple.shutdown)
        self._receivers.append(self._spawn("simple", lambda: self._receive(simple)))

    def start_senders(self) -> None:
        producer = Producer(unique("ChaosPG"))
        producer.set_name_server_address(self.bootstrap)
        producer.start()
        self._closers.append(producer.shutdown)
        transactional = TransactionMQProducer(unique("ChaosTG"), check_answer)
        transactional.set_name_server_address(self.bootstrap)
        transactional.start()
        self._closers.append(transactional.shutdown)
        config = v5.ClientConfiguration(self.bootstrap, v5.Credentials())
        timers = v5.Producer(config, (self.topic,))
        timers.startup()
        self._closers.append(timers.shutdown)
        self._senders.append(self._spawn("s", lambda: self._send_normal(producer)))
        self._senders.append(self._spawn("f", lambda: self._send_fifo(producer)))
        self._senders.append(self._spawn("d", lambda: self._send_delayed(producer)))
        self._senders.append(self._spawn("t", lambda: self._send_transactions(transactional)))
        self._senders.append(self._spawn("m", lambda: self._send_timers(timers)))

    def stop_senders(self) -> None:
        self._stop.set()
        for thread in self._senders:
            thread.join(60)

    def close(self) -> None:
        self.stop_senders()
        self._closing.set()
        for thread in self._receivers:
            thread.join(60)
        for close in reversed(self._closers):
            with contextlib.suppress(Exception):
                close()

    @staticmethod
    def _spawn(name: str, loop: Callable[[], None]) -> threading.Thread:
        thread = threading.Thread(target=loop, name=f"chaos-{name}", daemon=True)
        thread.start()
        return thread

    # -- receivers ------------------------------------------------------------------------------

    def _recorder(self, consumer: str) -> Callable[[Any], ConsumeStatus]:
        def record(msg: Any) -> ConsumeStatus:
            self.history.delivered(Delivery(bytes(msg.body).decode(), time.monotonic(), consumer))
            return ConsumeStatus.CONSUME_SUCCESS

        return record

    def _receive(self, consumer: v5.SimpleConsumer) -> None:
        while not self._closing.is_set():
            try:
                for msg in consumer.receive(16, 15):
                    # A delivery is the receipt: an ack that raised may still have been taken.
                    key = (msg.body or b"").decode()
                    self.history.delivered(Delivery(key, time.monotonic(), "simple"))
                    consumer.ack(msg)
            except Exception as exc:  # noqa: BLE001 - a fault's error: try again
                log.debug("simple consumer: %s", exc)
                time.sleep(0.5)

    # -- senders --------------------------------------------------------------------------------

    def _sending(self, name: str, invoke: Callable[[], Any], **fields: Any) -> Operation:
        started = time.monotonic()
        try:
            invoke()
            outcome = Outcome.OK
        except Exception as exc:  # noqa: BLE001 - any failure may still have reached Kafka
            log.debug("send %s: %s", name, exc)
            outcome = Outcome.UNKNOWN
        operation = Operation(
            name,
            invoked_s=started,
            completed_s=time.monotonic(),
            outcome=outcome,
            **{"topic": self.topic, **fields},
        )
        self.history.sent(operation)
        return operation

    def _loop(self, kind: str, send_one: Callable[[int], None]) -> None:
        for n in itertools.count():
            if self._stop.wait(PACE_S[kind]):
                return
            send_one(n)

    def _send_normal(self, producer: Producer) -> None:
        def one(n: int) -> None:
            msg = Message(self.topic)
            msg.set_body(f"s-{n}")
            self._sending(f"s-{n}", lambda: producer.send_sync(msg), kind=Kind.SEND)

        self._loop("s", one)

    def _send_fifo(self, producer: Producer) -> None:
        seqs = [0] * FIFO_GROUPS

        def one(n: int) -> None:
            group = n % FIFO_GROUPS
            seq = seqs[group]
            seqs[group] += 1
            body = f"f-{group}-{seq}"
            msg = Message(self.fifo_topic)
            msg.set_body(body)
            self._sending(
                body,
                lambda: producer.send_orderly_with_sharding_key(msg, f"g{group}"),
                kind=Kind.SEND,
                topic=self.fifo_topic,
                group=f"g{group}",
                seq=seq,
            )

        self._loop("f", one)

    def _send_delayed(self, producer: Producer) -> None:
        def one(n: int) -> None:
            level = 1 if n % 2 == 0 else 4
            msg = Message(self.topic)
            msg.set_body(f"d-{n}")
            msg.set_delay_time_level(level)
            now = time.monotonic()
            self._sending(
                f"d-{n}", lambda: producer.send_sync(msg), kind=Kind.DELAY,
                due_s=now + DELAYS_S[level],
            )  # fmt: skip

        self._loop("d", one)

    def _send_transactions(self, producer: TransactionMQProducer) -> None:
        def one(n: int) -> None:
            msg = Message(self.topic)
            msg.set_body(f"t-{n}")
            self._sending(
                f"t-{n}",
                lambda: producer.send_message_in_transaction(msg, lambda *_: decision(n)),
                kind=Kind.TRANSACTION,
                committed=committed(n),
            )

        self._loop("t", one)

    def _send_timers(self, producer: v5.Producer) -> None:
        def one(n: int) -> None:
            ahead_s = 1.0 + (n % 4)
            msg = v5.Message()
            msg.topic = self.topic
            msg.body = f"m-{n}".encode()
            msg.delivery_timestamp = int((time.time() + ahead_s) * 1000)
            now = time.monotonic()
            if n % 8 == RECALLED:
                self._send_and_recall(producer, msg, due_s=now + ahead_s)
                return
            self._sending(
                f"m-{n}", lambda: producer.send(msg), kind=Kind.TIMER, due_s=now + ahead_s
            )

        self._loop("m", one)

    def _send_and_recall(self, producer: v5.Producer, msg: v5.Message, due_s: float) -> None:
        key = (msg.body or b"").decode()
        started = time.monotonic()
        outcome, recalled = Outcome.OK, False
        try:
            receipt = producer.send(msg)
        except Exception as exc:  # noqa: BLE001 - it may have reached Kafka: not recalled
            log.debug("send %s: %s", key, exc)
            outcome = Outcome.UNKNOWN
        else:
            try:
                producer.recall_message(self.topic, receipt.recall_handle)
                recalled = True
            except Exception as exc:  # noqa: BLE001 - refused (delivered) or unknown
                if "delivered already" not in str(exc):
                    log.debug("recall %s: %s", key, exc)
                    outcome = Outcome.UNKNOWN
        self.history.sent(
            Operation(
                key, Kind.RECALL, invoked_s=started, completed_s=time.monotonic(),
                outcome=outcome, topic=self.topic, committed=not recalled, due_s=due_s,
            )
        )  # fmt: skip
