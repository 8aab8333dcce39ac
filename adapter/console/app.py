"""The console's WSGI application: routes, auth, CSRF, and each page's template.

Not a RocketMQ behaviour by itself: rocketmq-dashboard's pages. Pages are GETs and change
nothing; every action (resume a transaction, execute a reset, resend dead letters) is a POST
that must carry the request's credential and its CSRF token (:mod:`adapter.console.auth`), or
it gets 403. A console without auth answers only requests whose ``Host`` is a loopback name, so
a page of another site cannot reach it through DNS rebinding. An error of the command beneath
(an unknown group, a malformed time, a live group's reset) is shown as its one line.

Known gaps: a POST's result is shown on the page it returns (no redirect), so reloading that
page asks to post again; every action is safe to repeat (a resume or resend done is not redone).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any

import click
from confluent_kafka import KafkaException

from adapter.console import forms, views
from adapter.console.auth import COOKIE, Guard
from adapter.console.config import ConsoleConfig, is_loopback
from adapter.console.pages import Context, Pages
from adapter.exceptions import AdapterError
from adapter.ops.dead_letter_records import preview

log = logging.getLogger(__name__)

StartResponse = Callable[..., Any]
Page = Callable[[forms.Fields], Context]
HEADERS = [
    ("X-Frame-Options", "DENY"),
    ("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
    ("X-Content-Type-Options", "nosniff"),
]


def _utc(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


class Response:
    def __init__(self, status: int, body: bytes, content_type: str = "text/html; charset=utf-8"):
        self.status = status
        self.body = body
        self.headers = [("Content-Type", content_type), *HEADERS]


class ConsoleApp:
    """The WSGI callable of one console."""

    def __init__(self, config: ConsoleConfig, guard: Guard | None = None) -> None:
        self.config = config
        self.guard = guard or Guard(config.token, config.users)
        self.pages = Pages(config)
        self._views: dict[str, tuple[str, str, Page]] = {
            "/": ("overview.html", "Overview", self.pages.overview),
            "/transactions": ("transactions.html", "Transactions", self.pages.transactions),
            "/delays": ("delays.html", "Delays & timers", self.pages.delays),
            "/messages": ("messages.html", "Messages", self.pages.messages),
            "/groups": ("groups.html", "Consumer groups", self.pages.groups),
            "/groups/lag": ("group.html", "Consumer group", self.pages.group),
            "/groups/reset": ("plan.html", "Reset plan", self._plan),
            "/dlq": ("dlq_groups.html", "Dead letters", self.pages.dlq_groups),
            "/dlq/group": ("dlq.html", "Dead letters", self.pages.dlq),
        }
        self._actions: dict[str, Callable[[forms.Fields], tuple[str, forms.Fields, list[str]]]] = {
            "/transactions/resume": self._resume,
            "/groups/reset": self._execute,
            "/dlq/resend": self._resend,
        }

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        started = time.monotonic()
        method, path = environ.get("REQUEST_METHOD", "GET"), environ.get("PATH_INFO", "/")
        try:
            response = self._handle(environ, method, path, started)
        except Exception:  # a bug in a page: one line in the log, a 500 to the browser
            log.exception("console: %s %s failed", method, path)
            response = Response(500, b"internal error: see the console's log", "text/plain")
        elapsed = (time.monotonic() - started) * 1000
        log.info("console: %s %s %d in %.0f ms", method, path, response.status, elapsed)
        status = HTTPStatus(response.status)
        start_response(f"{status.value} {status.phrase}", response.headers)
        return [response.body]

    def _page(
        self, template: str, title: str, here: str, started: float, status: int = 200, **ctx: Any
    ) -> Response:
        ctx.setdefault("elapsed_ms", (time.monotonic() - started) * 1000)
        html = views.render(template, title=title, here=here, utc=_utc, preview=preview, **ctx)
        return Response(status, html.encode())

    def _handle(self, environ: dict[str, Any], method: str, path: str, started: float) -> Response:
        if path.startswith("/static/"):
            found = views.static(path[len("/static/") :])
            if found is None:
                return Response(404, b"not found", "text/plain")
            return Response(200, found[0], found[1])
        if self.guard.open and not is_loopback(_host_name(environ.get("HTTP_HOST", ""))):
            return Response(403, b"this console answers its loopback address only", "text/plain")
        if path == "/login":
            return self._login(environ, method, started)
        principal = self.guard.principal(
            environ.get("HTTP_AUTHORIZATION"), environ.get("HTTP_COOKIE")
        )
        if principal is None:
            if method == "GET" and self.guard.token is None:  # a users file: ask the browser
                response = Response(401, b"sign in", "text/plain")
                response.headers.append(("WWW-Authenticate", 'Basic realm="rmq-adapter console"'))
                return response
            if method == "GET":
                return self._page("login.html", "Sign in", "", started, 403, csrf="")
            return Response(403, b"forbidden: no valid credential", "text/plain")
        csrf = self.guard.csrf_token(principal)
        if method == "POST":
            try:
                fields = forms.read_body(environ["wsgi.input"], environ.get("CONTENT_LENGTH"))
            except forms.FormError as exc:
                return Response(400, str(exc).encode(), "text/plain")
            if not self.guard.csrf_ok(principal, forms.one(fields, "csrf")):
                return Response(403, b"forbidden: missing or wrong CSRF token", "text/plain")
            action = self._actions.get(path)
            if action is None:
                return Response(404, b"not found", "text/plain")
            try:
                view_path, query, done = action(fields)
            except (AdapterError, click.ClickException, KafkaException) as exc:
                return self._page("base.html", "Action refused", "", started, 400, error=_line(exc))
            return self._view(view_path, query, csrf, started, flash_ok=done)
        if method != "GET":
            return Response(405, b"method not allowed", "text/plain")
        query = forms.parse(environ.get("QUERY_STRING", ""))
        return self._view(path, query, csrf, started)

    def _view(
        self, path: str, query: forms.Fields, csrf: str, started: float, **extra: Any
    ) -> Response:
        found = self._views.get(path)
        if found is None:
            return Response(404, b"not found", "text/plain")
        template, title, page = found
        here = "/" + path.strip("/").split("/")[0] if path != "/" else "/"
        try:
            context = page(query)
        except (AdapterError, click.ClickException, KafkaException) as exc:
            return self._page(
                "base.html", title, here, started, 400, error=_line(exc), csrf=csrf, **extra
            )
        return self._page(template, title, here, started, csrf=csrf, **context, **extra)

    def _login(self, environ: dict[str, Any], method: str, started: float) -> Response:
        if method == "POST" and self.guard.token is not None:
            try:
                fields = forms.read_body(environ["wsgi.input"], environ.get("CONTENT_LENGTH"))
            except forms.FormError as exc:
                return Response(400, str(exc).encode(), "text/plain")
            given = forms.one(fields, "token") or ""
            if self.guard.token_matches(given):
                response = Response(303, b"")
                response.headers += [
                    ("Location", "/"),
                    (
                        "Set-Cookie",
                        f"{COOKIE}={self.guard.session()}; HttpOnly; SameSite=Strict; Path=/",
                    ),
                ]
                return response
        status = 403 if method == "POST" else 200
        return self._page("login.html", "Sign in", "", started, status, error=None)

    def _plan(self, query: forms.Fields) -> Context:
        return self.pages.reset(query, execute=False)

    def _resume(self, fields: forms.Fields) -> tuple[str, forms.Fields, list[str]]:
        return "/transactions", {}, [self.pages.resume(fields)]

    def _execute(self, fields: forms.Fields) -> tuple[str, forms.Fields, list[str]]:
        done = self.pages.reset(fields, execute=True)
        return "/groups/lag", {"group": [done["group"]]}, [done["text"]]

    def _resend(self, fields: forms.Fields) -> tuple[str, forms.Fields, list[str]]:
        lines = self.pages.resend(fields)
        return "/dlq/group", {"group": fields.get("group", [])}, lines


def _host_name(host: str) -> str:
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if ":" in host else host


def _line(exc: BaseException) -> str:
    if isinstance(exc, click.ClickException):
        return exc.format_message()
    if isinstance(exc, KafkaException):
        return f"Kafka: {exc.args[0].str()}"
    return str(exc)
