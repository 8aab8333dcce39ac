"""The console's HTML: Jinja2 templates and a stylesheet, shipped in the wheel as package data.

Not a RocketMQ behaviour. Templates autoescape every value (topic names, message keys and
dead-letter reasons are the applications' text, not the console's). No script is fetched at
run time: the pages are plain HTML forms and one stylesheet under ``/static/``.

Known gaps: none.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

NAV = (
    ("/", "Overview"),
    ("/transactions", "Transactions"),
    ("/delays", "Delays & timers"),
    ("/messages", "Messages"),
    ("/groups", "Consumer groups"),
    ("/dlq", "Dead letters"),
)
STATIC_TYPES = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}


@cache
def _environment() -> Environment:
    return Environment(
        loader=PackageLoader("adapter.console", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render(template: str, **context: Any) -> str:
    return _environment().get_template(template).render(nav=NAV, **context)


def static(name: str) -> tuple[bytes, str] | None:
    """A file of ``static/`` and its content type; ``None`` for any other name."""
    suffix = "." + name.rpartition(".")[2]
    if "/" in name or name.startswith(".") or suffix not in STATIC_TYPES:
        return None
    path = resources.files("adapter.console") / "static" / name
    if not path.is_file():
        return None
    return path.read_bytes(), STATIC_TYPES[suffix]
