"""The web console in a real headless Chromium, against a real broker: every page loads; a
message searched shows its lifecycle; a parked transaction resumed is delivered once; a dead
letter resent is consumed once; a group is reset by plan then execute; an action without the
token or without its CSRF token is refused."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from adapter.client import Message, TransactionStatus
from adapter.ops.cli import main as cli
from adapter.v5 import FilterExpression
from adapter.v5 import Message as V5Message
from tests.integration.console.conftest import Console
from tests.integration.ops.test_dlq import consumed_once_each, dead_lettered  # noqa: F401
from tests.integration.proxy.conftest import RunningProxy
from tests.integration.v5.conftest import MakeSimpleConsumer, MakeV5Producer
from tests.integration.v5.conftest import make_simple_consumer as make_simple_consumer
from tests.support import Recorder, unique, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]

PAGES = {
    "overview": ("/", "workers"),
    "transactions": ("/transactions", "pending"),
    "delays": ("/delays", "levels"),
    "messages": ("/messages", "by-id"),
    "groups": ("/groups", "groups"),
    "dlq": ("/dlq", "dlq-groups"),
}
FAST = {"transaction_timeout_ms": 1500, "check_interval_ms": 1000, "check_max": 1}


def post(url: str, fields: str, **headers: str) -> int:
    request = urllib.request.Request(  # noqa: S310 - the console's loopback address
        url, data=fields.encode(), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 - loopback
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


@pytest.mark.parametrize("page", sorted(PAGES))
def test_each_page_loads_with_its_table(console: Console, page: str) -> None:
    path, table = PAGES[page]
    console.open(path)
    assert console.browser.find_element(By.ID, table).is_displayed()
    assert not console.browser.find_elements(By.ID, "error")
    assert console.elapsed_ms() < 30_000  # a guard against a hang, not a benchmark


def test_a_message_searched_by_id_shows_its_lifecycle_and_by_key_its_place(
    console: Console, make_producer: Callable[..., Any], make_consumer: Callable[..., Any],
    new_topic: Callable[..., str],
) -> None:  # fmt: skip
    topic, group, recorder = new_topic(1), unique("GID_console"), Recorder()
    make_consumer(group, topic, recorder)
    message = Message(topic)
    message.set_keys("order-7")
    message.set_body("paid")
    msg_id = make_producer().send_sync(message).msg_id
    wait_until(lambda: len(recorder) == 1, timeout=30, what="the message consumed")
    console.open(f"/messages?topic={topic}&key=order-7")
    assert msg_id in console.text("found")
    console.click(f"#found a[href*='{msg_id}']")
    lifecycle = console.text("lifecycle")
    assert "delivered" in lifecycle
    assert f"{topic}[0]@0" in lifecycle

    def consumed() -> bool:
        console.open(f"/messages?id={msg_id}&topic={topic}")
        return f"group {group}: consumed" in console.text("group-states")

    wait_until(consumed, timeout=30, interval=0.5, what="the group's commit past the message")


def test_a_parked_transaction_resumed_from_its_page_is_delivered_once(
    console: Console, start_coordinator: Callable[..., Any],
    make_transaction_producer: Callable[..., Any], make_consumer: Callable[..., Any],
    new_topic: Callable[..., str],
) -> None:  # fmt: skip
    start_coordinator(**FAST)
    answers = {"answer": TransactionStatus.UNKNOWN}
    group, topic, recorder = unique("PG_console"), new_topic(1), Recorder()
    producer = make_transaction_producer(group, lambda _msg: answers["answer"])
    make_consumer(unique("GID_console"), topic, recorder)
    message = Message(topic)
    message.set_body("parked")
    tid = producer.send_message_in_transaction(message, lambda *_: None).msg_id

    def parked_with_button() -> bool:
        console.open(f"/transactions?group={group}")
        return bool(console.browser.find_elements(By.CSS_SELECTOR, f"tr[data-id='{tid}'] button"))

    wait_until(parked_with_button, timeout=60, interval=0.5, what="the transaction parked")
    assert len(recorder) == 0
    console.shoot("transactions")
    answers["answer"] = TransactionStatus.COMMIT
    console.click(f"tr[data-id='{tid}'] button")
    assert f"resumed {tid}" in console.browser.find_element(By.CLASS_NAME, "ok").text
    assert not console.browser.find_elements(By.CSS_SELECTOR, f"tr[data-id='{tid}'] button")
    wait_until(lambda: len(recorder) >= 1, timeout=30, what="the resumed message delivered")
    time.sleep(1.5)  # a second delivery would arrive in this time
    assert recorder.bodies == [b"parked"]
    console.open(f"/messages?id={tid}&topic={topic}")
    assert "COMMIT by check-back" in console.text("lifecycle")
    console.shoot("message")


def test_a_dead_letter_resent_from_its_page_is_consumed_once(
    console: Console,
    dead_lettered: tuple[str, Any, dict[str, str]],  # noqa: F811
) -> None:
    group, callback, ids = dead_lettered
    console.open(f"/dlq/group?group={group}")
    console.browser.find_element(By.CSS_SELECTOR, f"input[value='{ids['order-1']}']").click()
    console.shoot("dlq")
    console.click("#resend button")
    assert (
        f"resent            {ids['order-1']}"
        in console.browser.find_element(By.CLASS_NAME, "ok").text
    )
    consumed_once_each(callback, ["order-1"])


def test_a_group_is_reset_by_a_plan_and_then_its_execute_button(
    console: Console, make_producer: Callable[..., Any], make_consumer: Callable[..., Any],
    new_topic: Callable[..., str],
) -> None:  # fmt: skip
    topic, group, recorder = new_topic(1), unique("GID_reset"), Recorder()
    consumer = make_consumer(group, topic, recorder)
    producer = make_producer()
    for n in range(3):
        message = Message(topic)
        message.set_body(f"m{n}")
        producer.send_sync(message)
    wait_until(lambda: len(recorder) == 3, timeout=30, what="three consumed")
    consumer.shutdown()

    def without_members() -> bool:
        console.open(f"/groups/lag?group={group}")
        return console.text("state").startswith("empty, 0 member(s)")

    wait_until(without_members, timeout=30, interval=0.5, what="the group without members")
    Select(console.browser.find_element(By.NAME, "kind")).select_by_visible_text("earliest")
    console.click("#reset button")
    assert "3 replayed" in console.browser.find_element(By.TAG_NAME, "main").text
    console.shoot("plan")
    console.click("#execute button")
    assert (
        "done: the group's offsets are reset"
        in console.browser.find_element(By.CLASS_NAME, "ok").text
    )
    assert f"{topic}[0] 3 0 3" in console.text("queues")  # end 3, committed 0: all replayed
    console.shoot("group")


def test_an_action_without_the_token_or_without_its_csrf_token_is_refused(
    console: Console,
) -> None:
    console.open("/transactions")
    forms = console.browser.find_elements(By.NAME, "csrf")
    csrf = forms[0].get_attribute("value") if forms else "none"
    action = console.url + "transactions/resume"
    assert post(action, f"transaction_id=x&csrf={csrf}") == 403
    bearer = {"Authorization": f"Bearer {console.token}"}
    assert post(action, "transaction_id=x", **bearer) == 403
    refused = CliRunner().invoke(
        cli, ["console", "--bootstrap", "127.0.0.1:1", "--listen", "0.0.0.0:0"]
    )
    assert refused.exit_code == 1
    assert "--token T or --users FILE" in refused.output


def test_the_overview_shows_the_workers_the_proxies_and_the_delays_page_each_level(
    console: Console, console_proxy: RunningProxy,
    start_coordinator: Callable[..., Any], start_forwarder: Callable[..., Any],
    make_producer: Callable[..., Any], new_topic: Callable[..., str],
) -> None:  # fmt: skip
    start_coordinator()
    start_forwarder()
    topic = new_topic(4, "Orders")
    producer = make_producer()
    for n in range(3):
        message = Message(topic)
        message.set_body(f"order-{n}")
        message.set_delay_time_level(5)  # a minute: it waits on its level
        producer.send_sync(message)

    def both_online() -> bool:
        console.open("/")
        return all(
            g in console.text("workers") for g in ("CID_RMQ_SYS_TRANS", "CID_RMQ_SYS_SCHEDULE")
        ) and "no member" not in console.text("workers")

    wait_until(both_online, timeout=60, interval=0.5, what="both workers online")
    assert topic in console.text("topics")
    [proxy_row] = console.text("proxies").splitlines()[1:]
    assert proxy_row.startswith(f"{console_proxy.metrics.removeprefix('http://')} ready ")
    assert f" {console_proxy.endpoint} " in proxy_row, "the address its clients call"
    console.shoot("overview")
    console.open("/delays")
    assert console.text("levels")
    console.shoot("delays")
    console.open("/groups")
    console.shoot("groups")


def test_a_simple_consumer_s_share_group_is_listed_with_its_lag(
    console: Console, make_v5_producer: MakeV5Producer,
    make_simple_consumer: MakeSimpleConsumer, new_topic: Callable[..., str],
) -> None:  # fmt: skip
    topic, group = new_topic(1, "Shared"), unique("GID_simple")
    producer = make_v5_producer()
    for n in range(3):
        message = V5Message()
        message.topic, message.body = topic, f"m{n}".encode()
        producer.send(message)
    consumer = make_simple_consumer(group, {topic: FilterExpression()}, await_duration=0.5)
    got: list[V5Message] = []
    wait_until(lambda: got.extend(consumer.receive(1, 10)) or got, timeout=30, what="one")
    consumer.ack(got[0])

    def listed() -> bool:
        console.open("/groups")
        return f"{group} - simple (share group)" in console.text("groups")

    wait_until(listed, timeout=30, interval=0.5, what="the share group listed")
    console.browser.find_element(By.LINK_TEXT, group).click()

    def lagging_by_two() -> bool:
        console.open(f"/groups/lag?group={group}")
        queues = console.text("queues")
        return "start offset" in queues.lower() and f"{topic}[0] 3 1 2" in queues

    wait_until(lagging_by_two, timeout=30, interval=0.5, what="a lag of the two not acked")
    assert "a 5.x SimpleConsumer's share group" in console.text("state")
