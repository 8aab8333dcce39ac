"""The console as an operator runs it (``rmq-adapter console`` in a process of its own, with a
token), and a real headless Chromium from Debian driving it through Selenium.

Chromium and its driver are Debian's (``make test`` installs them: ``system-deps``); Selenium
is pointed at both, and Selenium Manager is told to stay offline, so nothing is downloaded.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from tests.integration.proxy.conftest import RunningProxy, launch
from tests.support import unique
from tests.workers import ProcessWorker

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
SCREENSHOTS = Path(__file__).resolve().parents[3] / "docs" / "images"


def left_the_document(element: WebElement) -> bool:
    """Whether ``element`` is gone with its page. Chromium, asked while the old document is
    being torn down, may answer "Node with given id does not belong to the document" instead
    of a stale reference: that is gone too (Selenium's own ``staleness_of`` raises on it)."""
    try:
        element.is_enabled()
    except StaleElementReferenceException:
        return True
    except WebDriverException as error:
        if "does not belong to the document" in str(error):
            return True
        raise
    return False


class Console:
    """The console under test: its address and token, and a browser signed in to it."""

    def __init__(self, url: str, token: str, browser: WebDriver, shots: Path) -> None:
        self.url, self.token, self.browser = url, token, browser
        self.shots = shots
        self.timings: dict[str, int] = {}

    def open(self, path: str) -> WebDriver:
        self.browser.get(self.url + path.lstrip("/"))
        return self.browser

    def click(self, css: str) -> None:
        """Click what ``css`` selects and wait for the page it leads to."""
        old = self.browser.find_element(By.TAG_NAME, "html")
        self.browser.find_element(By.CSS_SELECTOR, css).click()
        wait = WebDriverWait(self.browser, 60)
        wait.until(lambda _: left_the_document(old))
        wait.until(lambda b: b.execute_script("return document.readyState") == "complete")

    def text(self, element_id: str) -> str:
        return str(self.browser.find_element(By.ID, element_id).text)

    def shoot(self, name: str) -> None:
        """The page as ``console-<name>.png`` (a palette PNG of a few dozen kilobytes), and
        its time to render."""
        self.timings[name] = self.elapsed_ms()
        shot = Image.open(io.BytesIO(self.browser.get_screenshot_as_png()))
        shot.convert("RGB").quantize(colors=64).save(
            self.shots / f"console-{name}.png", optimize=True
        )

    def elapsed_ms(self) -> int:
        """The time the page says it took to make (``rendered in N ms``)."""
        found = re.search(r"(\d+) ms", self.text("timing"))
        assert found, self.text("timing")
        return int(found.group(1))


@pytest.fixture(scope="module")
def console_proxy(system_topics: str) -> Iterator[RunningProxy]:
    """A proxy the console is told of (``--proxy``)."""
    proxy = launch(system_topics)
    try:
        yield proxy
    finally:
        assert proxy.terminate(30) == 0, proxy.output()[-2000:]


@pytest.fixture(scope="module")
def console_process(system_topics: str, console_proxy: RunningProxy) -> Iterator[tuple[str, str]]:
    """``rmq-adapter console`` on a free loopback port, with a token and the proxy; its URL and
    token."""
    token = unique("token")
    process = ProcessWorker(
        "adapter",
        *("console", "--bootstrap", system_topics, "--listen", "127.0.0.1:0"),
        *("--proxy", console_proxy.metrics.removeprefix("http://")),
        env={"RMQ_ADAPTER_CONSOLE_TOKEN": token},
    )
    try:
        process.wait_for_output("console on http://", timeout=30)
        [line] = [line for line in process.lines if "console on http://" in line]
        yield line.split("console on ", 1)[1].strip(), token
    finally:
        assert process.terminate(30) == 0, "".join(process.lines[-20:])


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.fail(
            "Debian's chromium and chromium-driver are missing: `make test` installs them "
            "(apt-get install chromium chromium-driver)"
        )
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager: never download a driver or browser
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--disable-gpu", "--window-size=1280,900"):  # fmt: skip
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def console(
    console_process: tuple[str, str],
    browser: WebDriver,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Console]:
    """The console, with the browser signed in through its form. Its screenshots go to
    docs/images with RMQ_CONSOLE_SCREENSHOTS=1 (for the README), else to a temporary
    directory; the pages' times to render are printed at the end (read them with -s)."""
    url, token = console_process
    shots = tmp_path_factory.mktemp("console-shots")
    if os.environ.get("RMQ_CONSOLE_SCREENSHOTS") == "1":
        shots = SCREENSHOTS
    signed_in = Console(url, token, browser, shots)
    browser.get(url + "login")
    browser.find_element(By.NAME, "token").send_keys(token)
    signed_in.click("form[action='/login'] button")
    yield signed_in
    print("\nconsole pages' times to render (ms):", signed_in.timings)  # noqa: T201
