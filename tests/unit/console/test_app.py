"""The console's gate, without Kafka: credentials, CSRF, the loopback Host rule, sign-in, and
the stylesheet shipped as package data. No request here reaches a page's data (none is
allowed through), so no broker is needed."""

from __future__ import annotations

import base64
import io
from typing import Any
from wsgiref.util import setup_testing_defaults

import pytest

from adapter.config import KafkaSettings
from adapter.console.app import ConsoleApp
from adapter.console.auth import COOKIE, Users, hash_password
from adapter.console.config import ConsoleConfig

pytestmark = pytest.mark.timeout(10)

TOKEN = "s3cret"  # noqa: S105 - a test's token
KAFKA = KafkaSettings("127.0.0.1:1")  # nothing listens: a request that got through would fail


class Answer:
    def __init__(self, app: ConsoleApp, environ: dict[str, Any]) -> None:
        def start_response(status: str, headers: list[tuple[str, str]]) -> None:
            self.status = int(status.split()[0])
            self.headers = dict(headers)

        self.body = b"".join(app(environ, start_response)).decode()


def request(
    app: ConsoleApp,
    method: str,
    path: str,
    body: str = "",
    host: str = "127.0.0.1:8088",
    **headers: str,
) -> Answer:
    environ: dict[str, Any] = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "HTTP_HOST": host,
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body.encode()),
        **{f"HTTP_{k.upper()}": v for k, v in headers.items()},
    }
    setup_testing_defaults(environ)
    return Answer(app, environ)


def console(**auth: Any) -> ConsoleApp:
    return ConsoleApp(ConsoleConfig(KAFKA, auth.pop("host", "127.0.0.1"), 8088, **auth))


def test_an_action_without_the_token_is_refused() -> None:
    app = console(token=TOKEN)
    answer = request(app, "POST", "/dlq/resend", "group=GID_a&msg_id=1&csrf=anything")
    assert answer.status == 403


def test_an_action_with_the_token_but_without_its_csrf_token_is_refused() -> None:
    app = console(token=TOKEN)
    bearer = {"authorization": f"Bearer {TOKEN}"}
    assert request(app, "POST", "/dlq/resend", "group=GID_a&msg_id=1", **bearer).status == 403
    wrong = "group=GID_a&msg_id=1&csrf=" + app.guard.csrf_token("user:alice")
    assert request(app, "POST", "/dlq/resend", wrong, **bearer).status == 403


def test_an_action_of_a_console_without_auth_still_needs_its_csrf_token() -> None:
    answer = request(console(), "POST", "/transactions/resume", "transaction_id=T")
    assert answer.status == 403
    assert "CSRF" in answer.body


def test_a_page_without_the_token_is_the_sign_in_form_and_the_token_buys_a_cookie() -> None:
    app = console(token=TOKEN)
    refused = request(app, "GET", "/transactions")
    assert refused.status == 403
    assert 'action="/login"' in refused.body
    assert request(app, "POST", "/login", "token=wrong").status == 403
    signed_in = request(app, "POST", "/login", f"token={TOKEN}")
    assert signed_in.status == 303
    cookie = signed_in.headers["Set-Cookie"]
    assert cookie.startswith(f"{COOKIE}={app.guard.session()};")
    assert "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie
    assert TOKEN not in cookie


def test_a_console_with_a_users_file_asks_the_browser_for_basic_credentials() -> None:
    users = Users.parse(f"alice:{hash_password('wonder', bytes(16))}")
    app = console(users=users, host="0.0.0.0")  # noqa: S104
    answer = request(app, "GET", "/", host="10.0.0.5:8088")
    assert answer.status == 401
    assert answer.headers["WWW-Authenticate"].startswith("Basic ")
    wrong = "Basic " + base64.b64encode(b"alice:nope").decode()
    assert request(app, "POST", "/dlq/resend", "csrf=x", authorization=wrong).status == 403


def test_a_console_without_auth_answers_only_loopback_host_names() -> None:
    app = console()
    answer = request(app, "GET", "/", host="rebound.example:8088")
    assert answer.status == 403
    assert request(app, "GET", "/static/console.css", host="[::1]:8088").status == 200


def test_the_stylesheet_ships_in_the_package_and_nothing_else_is_served_from_there() -> None:
    app = console(token=TOKEN)
    css = request(app, "GET", "/static/console.css")
    assert css.status == 200
    assert css.headers["Content-Type"].startswith("text/css")
    for path in ["/static/../app.py", "/static/app.py", "/static/nothing.css"]:
        assert request(app, "GET", path).status == 404


def test_every_answer_forbids_framing_and_caching() -> None:
    answer = request(console(token=TOKEN), "GET", "/")
    assert answer.headers["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in answer.headers["Content-Security-Policy"]
    assert answer.headers["Cache-Control"] == "no-store"


def test_a_user_of_the_users_file_with_the_page_s_csrf_token_gets_through_to_the_action() -> None:
    users = Users.parse(f"alice:{hash_password('wonder', bytes(16))}")
    app = console(users=users)
    alice = "Basic " + base64.b64encode(b"alice:wonder").decode()
    csrf = app.guard.csrf_token("user:alice")
    answer = request(app, "POST", "/dlq/resend", f"csrf={csrf}", authorization=alice)
    assert answer.status == 400  # past the gate: the action itself says what is missing
    assert "give a group" in answer.body


def test_the_token_as_a_bearer_with_the_csrf_token_gets_through_to_the_action() -> None:
    app = console(token=TOKEN)
    csrf = app.guard.csrf_token("bearer")
    answer = request(
        app, "POST", "/transactions/resume", f"csrf={csrf}", authorization=f"Bearer {TOKEN}"
    )
    assert answer.status == 400
    assert "give the transaction id" in answer.body
