"""``rmq-adapter transactions list|resume``: pending and discarded transactional messages.

Plays the part of RocketMQ's transaction metrics and ``RESUME_CHECK_HALF_MESSAGE``
(:mod:`adapter.transaction.admin`). ``list`` shows pending half messages, or with
``--discarded`` those parked in ``TRANS_CHECK_MAX_TIME_TOPIC`` and what became of each one
resumed since; ``--group`` and ``--topic`` filter, ``--json`` prints JSON for scripts.

Known gaps: none.
"""

from __future__ import annotations

import click

from adapter.clock import SYSTEM_CLOCK
from adapter.config import KafkaSettings
from adapter.ops.options import bootstrap, clear_errors, option, timeout


@click.group("transactions")
def transactions_group() -> None:
    """Pending and discarded transactional messages."""


@transactions_group.command("list")
@bootstrap
@option(
    "--discarded", is_flag=True, help="List TRANS_CHECK_MAX_TIME_TOPIC instead of pending ones."
)
@option("--group", default=None, help="Only this producer group.", envvar="RMQ_ADAPTER_LIST_GROUP")
@option("--topic", default=None, help="Only this (real) topic.", envvar="RMQ_ADAPTER_LIST_TOPIC")
@option("--json", is_flag=True, help="JSON instead of a table.", envvar="RMQ_ADAPTER_LIST_JSON")
@timeout
@clear_errors
def transactions_list(
    bootstrap: str,
    discarded: bool,
    group: str | None,
    topic: str | None,
    json: bool,
    timeout: float,
) -> None:
    """Pending half messages with their age, check count and group (or the discarded ones)."""
    from adapter.transaction import admin, admin_view

    settings = KafkaSettings.from_env(bootstrap)
    skipped: list[str] = []
    if discarded:
        rows = admin.discarded(settings, timeout, skipped=skipped)
    else:
        rows = admin.pending(settings, timeout)
    rows = admin_view.select(rows, group=group, topic=topic)
    now_ms = SYSTEM_CLOCK.now_ms()
    if json:
        click.echo(admin_view.as_json(rows, now_ms=now_ms, skipped=skipped))
        return
    click.echo(admin_view.render(rows, discarded=discarded, now_ms=now_ms))
    for line in skipped:  # records the adapter did not write: one line each, apart
        click.echo(line, err=True)


@transactions_group.command("resume")
@bootstrap
@click.argument("transaction_id")
@timeout
@clear_errors
def transactions_resume(bootstrap: str, transaction_id: str, timeout: float) -> None:
    """Put a discarded message back into HALF with its check count reset (once)."""
    from adapter.transaction import admin

    resumed = admin.resume(KafkaSettings.from_env(bootstrap), transaction_id, timeout_s=timeout)
    click.echo(f"resumed {transaction_id} as half message {resumed.partition}@{resumed.offset}")
