"""`make demo`: the whole product in one story, on a local Kafka broker, in about a minute.

A shop moves from RocketMQ to Kafka by changing one import. Its code runs unchanged:

1. **Payments** are transactional messages (RocketMQ's own example, the seeds' ``Num0``..``Num9``):
   the local transaction records the payment in SQLite and the ``OrderPaid`` event (Avro) goes
   out only if that commits. ``Num0`` and ``Num1`` are declined (ROLLBACK: never delivered);
   ``Num8`` and ``Num9`` end without telling (UNKNOWN) and the check-back settles them from the
   database (COMMIT). ``rmq-adapter worker all`` plays the broker's part, exactly once.
2. A **notification** consumer receives every committed payment; it fails once on ``Num5``
   (RECONSUME_LATER), which comes back through the group's retry topic.
3. **Order events** are sent orderly per order (Created, Shipped); a fulfilment consumer sees each
   order's events in order, filtered by tag.
4. **Payment reminders** are delayed messages at levels 1, 2 and 3 (1 s, 5 s, 10 s).
5. A **cart service written for the 5.x client** (``adapter.v5``, the other drop-in) sets a timer
   message 3 s ahead for each declined order's cart (``delivery_timestamp``); ``Num1``'s
   customer pays another way, so its timer is recalled (``recall_message``) and never arrives.
   A 5.x ``PushConsumer`` expires the carts.
6. **Spark** reads the real topics through its Kafka source (read_committed): the points job
   streams beside the shop and credits 1 point per currency unit of each committed payment into
   a Delta ledger (MERGE on the message id); the telemetry job then measures delay lateness and
   transaction outcomes.

The report goes to the terminal and to ``.demo/report.txt``, the chart to ``.demo/report.png``.
The Spark session starts while the broker does, and runs the ledger's MERGE once on a scratch
ledger that holds a row; once the broker is up, the points job runs twice on a scratch topic
into a scratch ledger, and the real job's first (empty) batch runs before the shop opens, so
that the first payments meet a warm JVM. Commit-to-ledger is measured until the MERGE that
credited a payment returned: when the ledger could first be read with it. Everything started is
stopped at the end, and the demo returns only once every process it started (the broker, the
workers, Spark's driver JVM) has exited.
"""

from __future__ import annotations

import logging
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

from confluent_kafka.admin import NewTopic

# The only change a RocketMQ application makes: this import.
from adapter.client import (
    ConsumeStatus,
    Message,
    Producer,
    PushConsumer,
    TransactionMQProducer,
    TransactionStatus,
)
from adapter.kafka import clients, topics
from adapter.ops import broker

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / ".demo"
PAYMENTS = "OrderPaid"
WARM_UP_TOPIC = "SparkWarmUp"
"""A scratch topic the points job runs on before the shop (:meth:`SparkJobs.warm_up_on`)."""
EVENTS = "OrderEvents"
REMINDERS = "PaymentReminders"
CARTS = "CartExpiry"
CART_TIMER_S = 3
USERS = ("alice", "bob", "carol")
DECLINED = {"Num0", "Num1"}
UNDECIDED = {"Num8", "Num9"}
CHECK_TIMEOUT_MS = 2000  # --transaction-timeout-ms (RocketMQ's default is 6 s)


def wait_for(predicate, timeout: float = 60.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def table(header: tuple[str, ...], rows: list[tuple[object, ...]]) -> str:
    """A plain-text table, columns as wide as their widest cell, numbers to the right."""
    cells = [tuple(str(c) for c in row) for row in [header, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]

    def line(row: tuple[str, ...], raw: tuple[object, ...]) -> str:
        return "  ".join(
            c.rjust(w) if isinstance(v, int | float | Decimal) else c.ljust(w)
            for c, w, v in zip(row, widths, raw, strict=True)
        ).rstrip()

    out = [line(cells[0], header), "  ".join("-" * w for w in widths)]
    out += [line(c, r) for c, r in zip(cells[1:], rows, strict=True)]
    return "\n".join(out)


def create_topics(bootstrap: str) -> None:
    """The shop's topics, 4 queues each, as `mqadmin updateTopic` would make them."""
    admin = clients.admin({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, 4, 1) for t in (PAYMENTS, EVENTS, REMINDERS, CARTS)])
    for future in futures.values():
        future.result(timeout=30)


class PaymentService:
    """Records payments in SQLite; the OrderPaid event goes out only with a committed payment."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, check_same_thread=False)
        self.db.execute("create table payments (txn text primary key, ord text, amount text)")
        self.lock = threading.Lock()
        self.checks: list[tuple[str, int, float]] = []

    def pay(self, msg, order: str) -> TransactionStatus:  # type: ignore[no-untyped-def]
        if order in DECLINED:
            return TransactionStatus.ROLLBACK  # the card was declined: nothing is recorded
        with self.lock, self.db:
            self.db.execute(
                "insert into payments values (?, ?, ?)",
                (msg.id, order, msg.get_property("amount").decode()),
            )
        if order in UNDECIDED:
            return TransactionStatus.UNKNOWN  # committed locally, but the answer got lost
        return TransactionStatus.COMMIT

    def check(self, msg) -> TransactionStatus:  # type: ignore[no-untyped-def]
        """The check-back: answer from the database, the durable truth."""
        with self.lock:
            times = int(msg.get_property("TRANSACTION_CHECK_TIMES"))
            self.checks.append((msg.keys.decode(), times, time.time()))
            found = self.db.execute("select 1 from payments where txn = ?", (msg.id,)).fetchone()
        return TransactionStatus.COMMIT if found else TransactionStatus.ROLLBACK

    def paid(self) -> dict[str, tuple[Decimal, int]]:
        """What each member paid, by the database, and the points that earns (1 a whole unit
        of each payment; orders are numbered to members in turn)."""
        total: dict[str, tuple[Decimal, int]] = {}
        for order, amount in self.db.execute("select ord, amount from payments"):
            member = USERS[int(order[3:]) % len(USERS)]
            paid, points = total.get(member, (Decimal(0), 0))
            total[member] = (paid + Decimal(amount), points + int(Decimal(amount)))
        return total


def shop(bootstrap: str, data_dir: Path) -> dict[str, object]:
    """Runs the shop's RocketMQ code; returns what its consumers saw."""
    from adapter.spark import orders

    lock = threading.Lock()
    notified: Counter[str] = Counter()
    retried: list[tuple[str, int]] = []
    fulfilment: dict[str, list[str]] = defaultdict(list)
    reminders: dict[str, tuple[int, float]] = {}

    def notify(msg) -> ConsumeStatus:  # type: ignore[no-untyped-def]
        order = msg.keys.decode()
        with lock:
            if order == "Num5" and msg.reconsume_times == 0:
                return ConsumeStatus.RECONSUME_LATER  # the mail server is down, once
            if msg.reconsume_times:
                retried.append((order, msg.reconsume_times))
            notified[order] += 1
        return ConsumeStatus.CONSUME_SUCCESS

    def fulfil(msg) -> ConsumeStatus:  # type: ignore[no-untyped-def]
        with lock:
            fulfilment[msg.keys.decode()].append(msg.tags.decode())
        return ConsumeStatus.CONSUME_SUCCESS

    def remind(msg) -> ConsumeStatus:  # type: ignore[no-untyped-def]
        with lock:
            level = int(msg.get_property("level"))
            reminders[msg.keys.decode()] = (
                level,
                (msg.store_timestamp - msg.born_timestamp) / 1000,
            )
        return ConsumeStatus.CONSUME_SUCCESS

    carts = CartService(bootstrap)  # first: its share consumer joins while the rest starts
    consumers = []
    for group, topic, callback, expression, orderly in (
        ("GID_notify", PAYMENTS, notify, "Paid", False),
        ("GID_fulfilment", EVENTS, fulfil, "Created || Shipped", True),
        ("GID_reminders", REMINDERS, remind, "Reminder", False),
    ):
        consumer = PushConsumer(group, orderly=orderly)
        consumer.set_name_server_address(bootstrap)
        consumer.subscribe(topic, callback, expression)
        consumer.start()
        consumers.append(consumer)

    service = PaymentService(data_dir / "payments.db")
    payments = TransactionMQProducer("PID_payments", service.check)
    payments.set_name_server_address(bootstrap)
    payments.start()
    events = Producer("GID_shop")
    events.set_name_server_address(bootstrap)
    events.start()
    sent_at = time.time()
    ids: dict[str, str] = {}
    for n in range(10):
        order = f"Num{n}"
        amount = Decimal(10 * (n + 1)) + Decimal("0.50")
        paid = orders.OrderPaid(
            order, USERS[n % len(USERS)], amount, "EUR", int(time.time() * 1000)
        )
        msg = Message(PAYMENTS)
        msg.set_keys(order)
        msg.set_tags("Paid")
        msg.set_property("amount", str(amount))
        msg.set_body(orders.encode(paid))
        ids[order] = payments.send_message_in_transaction(msg, service.pay, order).msg_id
        for step in ("Created", "Shipped"):
            event = Message(EVENTS)
            event.set_keys(order)
            event.set_tags(step)
            event.set_body(f'{{"order": "{order}", "step": "{step}"}}')
            events.send_orderly_with_sharding_key(event, order)
    for level in (1, 2, 3):
        reminder = Message(REMINDERS)
        reminder.set_keys(f"Num{level + 1}")
        reminder.set_tags("Reminder")
        reminder.set_property("level", str(level))
        reminder.set_body(f"please rate your order Num{level + 1}")
        reminder.set_delay_time_level(level)
        events.send_sync(reminder)

    carts.expire_later(sorted(DECLINED), recall={"Num1"})

    committed = {f"Num{n}" for n in range(10)} - DECLINED
    complete = wait_for(
        lambda: (
            set(notified) == committed
            and retried
            and len(reminders) == 3
            and sum(len(v) for v in fulfilment.values()) == 20
            and len(carts.expired) == 1
        ),
        timeout=90,
    )
    time.sleep(1.0)  # a duplicate would show up now
    payments.shutdown()
    events.shutdown()
    carts.shutdown()
    for consumer in consumers:
        consumer.shutdown()
    return {
        "complete": complete,
        "service": service,
        "sent_at": sent_at,
        "notified": notified,
        "retried": retried,
        "fulfilment": fulfilment,
        "reminders": reminders,
        "committed": committed,
        "carts": carts,
        "ids": ids,
    }


class CartService:
    """The 5.x client's side of the shop: timers for unpaid carts, one recalled, and a 5.x
    ``PushConsumer`` that expires them."""

    def __init__(self, bootstrap: str) -> None:
        from adapter import v5

        class Expire(v5.MessageListener):
            def consume(listener, message):  # type: ignore[no-untyped-def]  # noqa: N805
                waited = (time.time() * 1000 - message.delivery_timestamp) / 1000
                self.expired.append((message.keys.pop(), CART_TIMER_S + waited))
                return v5.ConsumeResult.SUCCESS

        self.expired: list[tuple[str, float]] = []
        self.recalled: list[str] = []
        config = v5.ClientConfiguration(bootstrap, v5.Credentials())
        self.producer = v5.Producer(config, (CARTS,))
        self.producer.startup()
        expression = v5.FilterExpression("Expire")
        self.consumer = v5.PushConsumer(config, "GID_carts", Expire(), {CARTS: expression})
        self.consumer.startup()

    def expire_later(self, orders: list[str], recall: set[str]) -> None:
        from adapter import v5

        for order in orders:
            timer = v5.Message()
            timer.topic, timer.tag, timer.keys = CARTS, "Expire", order
            timer.body = f"expire the cart of {order}".encode()
            timer.delivery_timestamp = int(time.time() * 1000) + CART_TIMER_S * 1000
            receipt = self.producer.send(timer)
            if order in recall:
                self.producer.recall_message(CARTS, receipt.recall_handle)
                self.recalled.append(order)

    def shutdown(self) -> None:
        self.producer.shutdown()
        self.consumer.shutdown()


def life_of(bootstrap: str, seen: dict[str, object], order: str) -> str:
    """The message's whole life, as ``rmq-adapter message show`` prints it."""
    from adapter.ops import lifecycle
    from adapter.ops.message_search import MessageSearch

    msg_id = seen["ids"][order]  # type: ignore[index]
    begin_ms = int(seen["sent_at"] * 1000) - 60_000  # type: ignore[operator]
    search = MessageSearch({"bootstrap.servers": bootstrap}, begin_ms, begin_ms + 3_600_000, 30)
    life = search.show(msg_id, [PAYMENTS])
    shown = lifecycle.render(msg_id, life.steps, life.groups, life.summary())
    return f"the life of {order} (rmq-adapter message show {msg_id}):\n{shown}"


def report(seen: dict[str, object], spark_report, chart: Path) -> tuple[str, bool]:  # type: ignore[no-untyped-def]
    from adapter.spark.report import format_report

    service: PaymentService = seen["service"]  # type: ignore[assignment]
    notified: Counter[str] = seen["notified"]  # type: ignore[assignment]
    committed: set[str] = seen["committed"]  # type: ignore[assignment]
    fulfilment: dict[str, list[str]] = seen["fulfilment"]  # type: ignore[assignment]
    reminders: dict[str, tuple[int, float]] = seen["reminders"]  # type: ignore[assignment]
    retried: list[tuple[str, int]] = seen["retried"]  # type: ignore[assignment]
    carts: CartService = seen["carts"]  # type: ignore[assignment]
    checks = [(order, times, at - seen["sent_at"]) for order, times, at in service.checks]  # type: ignore[operator]

    payments = []
    for n in range(10):
        order = f"Num{n}"
        outcome = (
            "declined (ROLLBACK)"
            if order in DECLINED
            else ("UNKNOWN, then COMMIT by check-back" if order in UNDECIDED else "COMMIT")
        )
        payments.append((order, USERS[n % len(USERS)], outcome, notified.get(order, 0)))
    paid = service.paid()
    balances = spark_report.points.balances
    members = [
        (user, paid.get(user, (Decimal(0), 0))[0], paid.get(user, (Decimal(0), 0))[1],
         balances.get(user, 0))
        for user in USERS
    ]  # fmt: skip
    in_order = all(steps == ["Created", "Shipped"] for steps in fulfilment.values())
    late = sorted(reminders.values())
    ok = (
        bool(seen["complete"])
        and set(notified) == committed
        and all(c == 1 for c in notified.values())
        and retried == [("Num5", 1)]
        and in_order
        and all(wait >= (1, 5, 10)[level - 1] for level, wait in late)
        and all(expected == got for _u, _p, expected, got in members)
        and sorted({o for o, _t, _at in checks}) == sorted(UNDECIDED)
        and [order for order, _ in carts.expired] == ["Num0"]
        and all(wait >= CART_TIMER_S for _, wait in carts.expired)
    )
    lines = [
        "rmq-kafka-adapter demo: a shop's RocketMQ code on Apache Kafka",
        "",
        "payments (transactional messages, RocketMQ's Num0..Num9 example)",
        table(("order", "member", "local transaction", "delivered"), payments),
        "",
        f"check-backs: {len(checks)} "
        + ", ".join(f"{o} (check {t}, {s:.1f} s after sending)" for o, t, s in checks),
        f"notification consumer: {sum(notified.values())} messages, each committed payment once; "
        f"Num5 failed once and came back with reconsume_times {retried[0][1] if retried else '-'}",
        f"fulfilment consumer (orderly, tags Created || Shipped): "
        f"{sum(len(v) for v in fulfilment.values())} events, each order in order: {in_order}",
        "payment reminders (delayed): "
        + ", ".join(f"level {level} after {wait:.2f} s" for level, wait in late),
        "",
        f"cart expiry (5.x client: timer messages {CART_TIMER_S} s ahead, a 5.x PushConsumer): "
        + ", ".join(f"{order} expired after {wait:.2f} s" for order, wait in carts.expired)
        + "; "
        + ", ".join(f"{order} recalled, never delivered" for order in carts.recalled),
        "",
        "points per member (Spark points job, Delta ledger) = committed payments",
        table(("member", "paid (EUR)", "expected points", "ledger points"), members),
        "",
        format_report(spark_report),
        "",
        f"chart: {chart}",
        "RESULT: "
        + ("everything as RocketMQ would deliver it, exactly once" if ok else "INCOMPLETE"),
    ]
    return "\n".join(lines), ok


class SparkJobs:
    """The points job streams beside the shop (250 ms trigger), as in production; the telemetry
    job runs once at the end (availableNow)."""

    def __init__(self, bootstrap: str, state: Path) -> None:
        from adapter.spark.config import Job, SparkJobConfig

        self.state = state
        self.points = SparkJobConfig.from_env(
            Job.POINTS,
            bootstrap=bootstrap,
            topics=(PAYMENTS,),
            trigger_ms=250,
            checkpoint=state / "points" / "checkpoint",
            table=state / "points" / "table",
        )
        self.telemetry = SparkJobConfig.from_env(
            Job.TELEMETRY, bootstrap=bootstrap, available_now=True,
            checkpoint=state / "telemetry" / "checkpoint", table=state / "telemetry" / "table",
        )  # fmt: skip
        self.credited = 0
        self.merged_ms: dict[int, float] = {}
        """Batch id -> when its MERGE returned (epoch ms): the ledger readable from then."""
        self._lock = threading.Lock()
        self.session = None
        self.failure: BaseException | None = None

    def prepare(self) -> None:
        """The session, and the sink's MERGE run once on a scratch ledger, while the broker
        starts (no Kafka needed yet): the first payments then meet a warm JVM."""
        try:
            from adapter.spark.ledger import warm_up
            from adapter.spark.session import build_session

            logging.getLogger("adapter").setLevel(logging.WARNING)
            self.session = build_session(self.points)
            warm_up(self.session, self.state / "warm-up")
        except BaseException as exc:  # noqa: BLE001 - reported by start(), on the main thread
            self.failure = exc

    def warm_up_on(self, bootstrap: str) -> None:
        """The points job twice, availableNow, on a scratch topic of two payments and into a
        scratch ledger, once the broker is up: the Kafka source's reads, the OrderPaid decoding
        and the MERGE into a ledger that holds rows then run in the JVM before the shop's
        payments do (Spark reuses the code it generated: the plans are the same)."""
        try:
            from adapter.spark import orders
            from adapter.spark.points import run_points

            if self.failure is not None or self.session is None:
                return
            admin = clients.admin({"bootstrap.servers": bootstrap})
            admin.create_topics([NewTopic(WARM_UP_TOPIC, 1, 1)])[WARM_UP_TOPIC].result(timeout=30)
            producer = Producer("GID_warm_up")
            producer.set_name_server_address(bootstrap)
            producer.start()
            scratch = self.state / "warm-up-stream"
            config = self.points.with_(
                topics=(WARM_UP_TOPIC,), available_now=True,
                checkpoint=scratch / "checkpoint", table=scratch / "table",
            )  # fmt: skip
            try:
                for n in range(2):  # into an empty ledger, then into one that holds a row
                    paid = orders.OrderPaid(f"warm-up-{n}", "warm-up", Decimal(1), "EUR", 0)
                    msg = Message(WARM_UP_TOPIC)
                    msg.set_body(orders.encode(paid))
                    producer.send_sync(msg)
                    run_points(config, self.session)
            finally:
                producer.shutdown()
                shutil.rmtree(scratch, ignore_errors=True)
        except BaseException as exc:  # noqa: BLE001 - reported by start(), on the main thread
            self.failure = exc

    def start(self) -> None:
        from adapter.spark.points import start_points

        if self.failure is not None:
            raise self.failure
        self.query = start_points(self.session, self.points, self._counted)
        # A query's first batch runs at once, even on an empty topic, and takes seconds (the
        # Kafka source's first offsets, the sink's first MERGE into this ledger): before the
        # shop, not in the way of its first payments.
        wait_for(lambda: bool(self.merged_ms) or not self.query.isActive, timeout=120)
        if not self.query.isActive:
            raise RuntimeError(f"the points job stopped: {self.query.exception()}")

    def _counted(self, outcome) -> None:  # type: ignore[no-untyped-def]
        with self._lock:
            self.credited += outcome.inserted
            self.merged_ms[outcome.batch_id] = outcome.merged_at.timestamp() * 1000

    def finish(self, expected: int):  # type: ignore[no-untyped-def]
        """Wait until the ledger holds ``expected`` rows, stop the points job, run telemetry;
        the report of both."""
        from adapter.spark.points import points_result
        from adapter.spark.report import SparkReport, commit_to_ledger
        from adapter.spark.streaming import stop_between_batches
        from adapter.spark.telemetry import run_telemetry

        wait_for(lambda: self.credited >= expected, timeout=90)
        stop_between_batches(self.query)
        points = points_result(self.session, self.points, [self.query])
        telemetry = run_telemetry(self.telemetry, self.session)
        latency, batches = commit_to_ledger(self.session, self.points.table, self.merged_ms)
        return SparkReport(points, telemetry, latency, batches)

    def stop(self) -> None:
        """Stop the session and wait until its driver JVM has exited."""
        from adapter.spark.session import stop_session

        if self.session is not None:
            stop_session(self.session)
            self.session = None


def main() -> None:
    from adapter.spark.report import draw_chart

    started = time.monotonic()
    data_dir = Path(tempfile.mkdtemp(prefix="rmq-demo-"))
    OUT.mkdir(exist_ok=True)
    port = broker.free_port_pair()
    spark = SparkJobs(f"127.0.0.1:{port}", data_dir / "spark")
    print("starting a local Kafka broker (KRaft, the official jars) and Spark (local[2])...")
    preparing = threading.Thread(target=spark.prepare, name="spark-session")
    preparing.start()
    workers = None
    ok = False
    try:
        address = broker.start(broker.BrokerConfig(data_dir / "kafka", port=port))
        topics.init_topics({"bootstrap.servers": address}, topics.system_layout())
        print("starting rmq-adapter worker all (transaction coordinator, delay forwarder)...")
        workers = subprocess.Popen(  # noqa: S603 - fixed argv
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
                "--check-interval-ms",
                "2000",
            ]
        )
        preparing.join()
        warming = threading.Thread(target=spark.warm_up_on, args=(address,), name="spark-warm")
        warming.start()
        create_topics(address)
        warming.join()
        print("starting the Spark points job (local[2], 250 ms trigger)...", flush=True)
        spark.start()
        print("running the shop: payments, notifications, orderly events, delayed reminders...")
        seen = shop(address, data_dir)
        print("finishing the Spark jobs (points ledger, telemetry)...", flush=True)
        spark_report = spark.finish(expected=len(seen["committed"]))  # type: ignore[arg-type]
        chart = draw_chart(spark_report, OUT / "report.png")
        text, ok = report(seen, spark_report, chart)
        text += "\n\n" + life_of(address, seen, "Num8")
        (OUT / "report.txt").write_text(text + "\n")
        print()
        print(text)
    finally:
        preparing.join()
        spark.stop()
        if workers is not None:
            workers.send_signal(signal.SIGTERM)
            workers.wait(60)
        broker.stop(data_dir / "kafka")
        shutil.rmtree(data_dir, ignore_errors=True)
        print(
            f"workers, broker and Spark stopped; {time.monotonic() - started:.0f} s in all "
            f"(report in {OUT / 'report.txt'})"
        )
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
