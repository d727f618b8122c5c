"""``commitgate query``: records by key, offset or time, from CommitGate's admin HTTP API
(``/v1/query``; the Kafka protocol has no lookup by key, so this command needs CommitGate).

``--key K`` finds every record of the topic with that key through the IndexFiles, newest
first (``--since``/``--until`` bound the time the broker stored them); ``--partition P
--offset O`` gives the record at O; ``--partition P --time T`` the first at or after T."""
from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from commitgate.cli.common import AsJson, fail, print_json, show_time
from commitgate.gateway.admin.query import parse_time

DEFAULT_ADMIN = "http://127.0.0.1:9644"
TIMEOUT_S = 30.0
SHOWN_CHARS = 80

TimeOption = Annotated[str | None, typer.Option(help="ms, ISO 8601 or -15m/-2h/-1d")]


def query(
    topic: str,
    key: Annotated[str | None, typer.Option(help="the records with this key (UTF-8)")] = None,
    since: TimeOption = None,
    until: TimeOption = None,
    max_records: Annotated[int | None, typer.Option("--max", min=1)] = None,
    partition: Annotated[int | None, typer.Option(min=0)] = None,
    offset: Annotated[int | None, typer.Option(min=0)] = None,
    at: Annotated[str | None, typer.Option("--time", help="with --partition: the first "
                                                          "record at or after")] = None,
    admin: Annotated[str, typer.Option(help="CommitGate's admin.listeners URL")] = DEFAULT_ADMIN,
    as_json: AsJson = False,
) -> None:
    params = {"topic": topic, "key": key, "since": _ms(since), "until": _ms(until),
              "max": max_records, "partition": partition, "offset": offset, "time": _ms(at)}
    answer = fetch(admin, {k: str(v) for k, v in params.items() if v is not None})
    if as_json:
        print_json(answer)
        return
    table = Table("partition", "offset", "timestamp", "key", "value", "headers")
    for r in answer["records"]:
        table.add_row(str(r["partition"]), str(r["offset"]), show_time(r["timestamp"]),
                      _shown(r["key"]), _shown(r["value"]),
                      ", ".join(f"{k}={_shown(v)}" for k, v in r["headers"]))
    out = Console()
    out.print(table)
    out.print(f"{len(answer['records'])} records")


def _ms(text: str | None) -> int | None:
    try:
        return None if text is None else parse_time(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def _shown(text: str | None) -> str:
    if text is None:
        return "-"
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 1] + "…"


def fetch(admin: str, params: dict[str, str]) -> dict:
    """GET /v1/query; the API's JSON error (or why it cannot be reached) ends the command."""
    if not admin.startswith(("http://", "https://")):
        raise typer.BadParameter(f"--admin takes an http:// URL, got {admin!r}")
    url = f"{admin.rstrip('/')}/v1/query?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            return json.load(response)
    except urllib.error.HTTPError as exc:
        fail(_error_text(exc))
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        fail(f"no admin API at {admin} ({reason}); query needs CommitGate with "
             f"admin.listeners set")


def _error_text(exc: urllib.error.HTTPError) -> str:
    try:
        return json.load(exc)["error"]
    except (ValueError, KeyError, TypeError):
        return f"HTTP {exc.code} {exc.reason}"
