"""`make demo`: start a broker, run a RocketMQ application unchanged but for its import, report.

The scenario is an order service: it publishes order events (tags ``Created`` / ``Paid`` /
``Shipped``), keyed by order id, with orderly sends so each order's events stay in order; a
billing consumer subscribes to ``Paid`` only, an audit consumer broadcasts everything, and a
fulfilment consumer processes each order's events in order. Each new order also schedules a
payment reminder at delay level 2 (5 s), and billing fails its first attempt at one order
(RECONSUME_LATER), which comes back through the retry topic at level 3 (10 s).

Payments are transactional messages: the local transaction records the payment in a SQLite
database and the message reaches the ledger consumer only if that commits. One payment is
declined (ROLLBACK: the ledger never sees it) and one local transaction ends without telling
(UNKNOWN): the coordinator's check-back asks the payment service, which finds the payment in its
database and commits. ``rmq-adapter worker all`` (transaction coordinator and schedule
forwarder) runs as its own process, as in production.
"""

from __future__ import annotations

import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path

# The only change a RocketMQ application makes: this import.
from adapter.client import (
    ConsumeStatus,
    Message,
    MessageModel,
    Producer,
    PushConsumer,
    TransactionMQProducer,
    TransactionStatus,
)
from adapter.kafka import topics
from adapter.ops import broker

ORDERS = 20
STEPS = ("Created", "Paid", "Shipped")
DECLINED = "order-013"
UNDECIDED = "order-017"
CHECK_TIMEOUT_MS = 2000  # the demo's --transaction-timeout-ms (RocketMQ's default is 6 s)


def wait_for(predicate, timeout: float = 60.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def run(bootstrap: str, data_dir: Path) -> None:
    topic = f"OrderEvents_{int(time.time())}"
    lock = threading.Lock()
    billed: list[str] = []
    retried: list[int] = []
    reminders: dict[str, float] = {}
    audited: dict[str, int] = defaultdict(int)
    fulfilment: dict[str, list[str]] = defaultdict(list)

    def bill(msg) -> ConsumeStatus:  # type: ignore[no-untyped-def]
        order = msg.keys.decode()
        with lock:
            if order == "order-007" and msg.reconsume_times == 0:
                return ConsumeStatus.RECONSUME_LATER  # the payment service is down, once
            if msg.reconsume_times:
                retried.append(msg.reconsume_times)
            billed.append(order)
        return ConsumeStatus.CONSUME_SUCCESS

    def remind(msg) -> ConsumeStatus:  # type: ignore[no-untyped-def]
        with lock:
            reminders[msg.keys.decode()] = (msg.store_timestamp - msg.born_timestamp) / 1000
        return ConsumeStatus.CONSUME_SUCCESS

    def audit(instance: str):  # type: ignore[no-untyped-def]
        def callback(msg) -> ConsumeStatus:  # type: ignore[no-untyped-def]
            with lock:
                audited[instance] += 1
            return ConsumeStatus.CONSUME_SUCCESS

        return callback

    def fulfil(msg) -> ConsumeStatus:  # type: ignore[no-untyped-def]
        with lock:
            fulfilment[msg.keys.decode()].append(msg.tags.decode())
        return ConsumeStatus.CONSUME_SUCCESS

    producer = Producer("GID_order_service")
    producer.set_name_server_address(bootstrap)
    producer.start()
    # Create the topic with the first send (the broker auto-creates it with 4 queues).
    first = Message(topic)
    first.set_body("hello")
    first.set_tags("Hello")
    producer.send_sync(first)

    reminder_topic = f"PaymentReminders_{int(time.time())}"
    first = Message(reminder_topic)
    first.set_body("hello")
    producer.send_sync(first)

    consumers = []
    for group, callback, expression, kwargs in (
        ("GID_reminders", remind, "Reminder", {}),
        ("GID_billing", bill, "Paid", {}),
        ("GID_fulfilment", fulfil, "Created || Paid || Shipped", {"orderly": True}),
        ("GID_audit", audit("audit-1"), "*", {"message_model": MessageModel.BROADCASTING}),
        ("GID_audit", audit("audit-2"), "*", {"message_model": MessageModel.BROADCASTING}),
    ):
        consumer = PushConsumer(group, **kwargs)
        consumer.set_name_server_address(bootstrap)
        if group == "GID_audit":
            consumer.set_instance_name(f"audit-{len(consumers) - 1}")
        consumer.subscribe(reminder_topic if callback is remind else topic, callback, expression)
        consumer.start()
        consumers.append(consumer)

    started = time.monotonic()
    for step in STEPS:
        for order in range(ORDERS):
            msg = Message(topic)
            msg.set_keys(f"order-{order:03d}")
            msg.set_tags(step)
            msg.set_property("amount", str(10 * (order + 1)))
            msg.set_body(f'{{"order": {order}, "step": "{step}"}}')
            producer.send_orderly_with_sharding_key(msg, f"order-{order:03d}")
            if step == "Created":
                reminder = Message(reminder_topic)
                reminder.set_keys(f"order-{order:03d}")
                reminder.set_tags("Reminder")
                reminder.set_body(f'{{"order": {order}, "remind": "please pay"}}')
                reminder.set_delay_time_level(2)
                producer.send_sync(reminder)
    sent = ORDERS * len(STEPS)
    send_s = time.monotonic() - started
    total = sent + 1

    complete = wait_for(
        lambda: (
            len(billed) == ORDERS
            and len(reminders) == ORDERS
            and sum(len(v) for v in fulfilment.values()) == sent
            and all(audited[i] == total for i in ("audit-1", "audit-2"))
        )
    )
    for consumer in consumers:
        consumer.shutdown()
    producer.shutdown()

    in_order = all(steps == list(STEPS) for steps in fulfilment.values())
    print()
    print("rmq-kafka-adapter demo: an order service on Kafka through the RocketMQ API")
    print("-" * 72)
    print(f"Kafka bootstrap            {bootstrap}")
    print(f"topic                      {topic} (4 queues)")
    print(f"sent (orderly, acked)      {sent} events for {ORDERS} orders in {send_s:.2f} s")
    fulfilled = sum(len(v) for v in fulfilment.values())
    print(f"billing  (tag 'Paid')      {len(billed)} messages, one per order: {len(set(billed))}")
    print(f"  retried after a failure  order-007 came back with reconsume_times {retried}")
    waits = sorted(reminders.values())
    on_time = bool(waits) and waits[0] >= 5.0
    print(
        f"reminders (level 2 = 5 s)  {len(reminders)} delivered, {waits[0] if waits else 0:.2f}"
        f"-{waits[-1] if waits else 0:.2f} s after sending, none early: {on_time}"
    )
    print(f"fulfilment (orderly)       {fulfilled} messages, each order Created/Paid/Shipped")
    print(f"                           in that order: {in_order}")
    for instance in ("audit-1", "audit-2"):
        print(f"audit {instance} (broadcast) {audited[instance]} of {total} messages")
    payments_ok = run_payments(bootstrap, data_dir)
    print("-" * 72)
    ok = (
        complete
        and in_order
        and len(billed) == ORDERS
        and on_time
        and retried == [1]
        and payments_ok
    )
    print(
        "RESULT: "
        + ("every consumer saw exactly what RocketMQ would deliver" if ok else "INCOMPLETE")
    )
    if not ok:
        raise SystemExit(1)


class PaymentService:
    """Records payments in SQLite; the message goes out only with a committed payment."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, check_same_thread=False)
        self.db.execute("create table payments (txn text primary key, payment_order text)")
        self.lock = threading.Lock()
        self.checks: list[tuple[str, int, float]] = []

    def pay(self, msg, order: str) -> TransactionStatus:  # type: ignore[no-untyped-def]
        if order == DECLINED:
            return TransactionStatus.ROLLBACK  # the card was declined: nothing is recorded
        with self.lock, self.db:
            self.db.execute("insert into payments values (?, ?)", (msg.id, order))
        if order == UNDECIDED:
            return TransactionStatus.UNKNOWN  # committed locally, but the answer got lost
        return TransactionStatus.COMMIT

    def check(self, msg) -> TransactionStatus:  # type: ignore[no-untyped-def]
        """The check-back: answer from the database, the durable truth."""
        with self.lock:
            times = int(msg.get_property("TRANSACTION_CHECK_TIMES"))
            self.checks.append((msg.keys.decode(), times, time.time()))
            found = self.db.execute("select 1 from payments where txn = ?", (msg.id,)).fetchone()
        return TransactionStatus.COMMIT if found else TransactionStatus.ROLLBACK


def run_payments(bootstrap: str, data_dir: Path) -> bool:
    topic = f"Payments_{int(time.time())}"
    service = PaymentService(data_dir / "payments.db")
    lock = threading.Lock()
    ledger: dict[str, int] = defaultdict(int)

    def record(msg) -> ConsumeStatus:  # type: ignore[no-untyped-def]
        with lock:
            ledger[msg.keys.decode()] += 1
        return ConsumeStatus.CONSUME_SUCCESS

    creator = Producer("GID_payments_setup")
    creator.set_name_server_address(bootstrap)
    creator.start()
    hello = Message(topic)
    hello.set_body("hello")
    hello.set_tags("Hello")
    creator.send_sync(hello)  # creates the topic (4 queues)
    creator.shutdown()

    ledger_consumer = PushConsumer("GID_ledger")
    ledger_consumer.set_name_server_address(bootstrap)
    ledger_consumer.subscribe(topic, record, "Payment")
    ledger_consumer.start()
    producer = TransactionMQProducer("PID_payments", service.check)
    producer.set_name_server_address(bootstrap)
    producer.start()
    started = time.monotonic()
    born = 0.0
    for n in range(ORDERS):
        order = f"order-{n:03d}"
        msg = Message(topic)
        msg.set_keys(order)
        msg.set_tags("Payment")
        msg.set_body(f'{{"order": {n}, "amount": {10 * (n + 1)}}}')
        if order == UNDECIDED:
            born = time.time()
        producer.send_message_in_transaction(msg, service.pay, order)
    send_s = time.monotonic() - started
    expected = {f"order-{n:03d}" for n in range(ORDERS)} - {DECLINED}
    complete = wait_for(lambda: set(ledger) == expected, timeout=60)
    time.sleep(1.0)  # a duplicate would show up now
    producer.shutdown()
    ledger_consumer.shutdown()

    once = all(count == 1 for count in ledger.values())
    checked = [times for order, times, _at in service.checks if order == UNDECIDED]
    after = [at - born for order, _t, at in service.checks if order == UNDECIDED]
    print(f"payments (transactional)   {ORDERS} sent in {send_s:.2f} s: 18 committed, 1 declined,")
    print(f"                           1 undecided ({UNDECIDED}), settled by the check-back")
    print(f"ledger consumer            {sum(ledger.values())} payments, each exactly once: {once}")
    print(f"  declined {DECLINED}        seen by the ledger: {DECLINED in ledger}")
    print(
        f"  check-back of {UNDECIDED}  {len(checked)} check(s), the first "
        f"{after[0] if after else 0:.2f} s after sending (timeout {CHECK_TIMEOUT_MS / 1000:.0f} s);"
        f" committed from the database: {UNDECIDED in ledger}"
    )
    return complete and once and DECLINED not in ledger and checked[:1] == [1]


def main() -> None:
    data_dir = Path(tempfile.mkdtemp(prefix="rmq-demo-"))
    print("starting a local Kafka broker (KRaft, official jars)...", flush=True)
    address = broker.start(broker.BrokerConfig(data_dir, port=broker.free_port_pair()))
    forwarder = None
    try:
        topics.init_topics({"bootstrap.servers": address}, topics.system_layout())
        print("starting the workers (rmq-adapter worker all: coordinator and forwarder)...")
        forwarder = subprocess.Popen(  # noqa: S603 - fixed argv
            [
                sys.executable,
                "-m",
                "adapter",
                "--log-level",
                "WARNING",
                "worker",
                "all",
                "--bootstrap",
                address,
                "--transaction-timeout-ms",
                str(CHECK_TIMEOUT_MS),
            ]
        )
        run(address, data_dir)
    finally:
        if forwarder is not None:
            forwarder.send_signal(signal.SIGTERM)
            forwarder.wait(60)
        broker.stop(data_dir)
        shutil.rmtree(data_dir, ignore_errors=True)
        print("broker stopped.")


if __name__ == "__main__":
    main()
