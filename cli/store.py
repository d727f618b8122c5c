"""``commitgate store``: look inside a data directory offline (the broker need not run).

``inspect`` reports the segments, ConsumeQueues, IndexFiles, checkpoint and topics with a
consistency report that repairs nothing (engine/store_inspect.py); ``verify`` reads every
CommitLog entry and checks its checksums (engine/store_verify.py). Neither writes into the
directory nor takes its lock; on a directory a broker holds they say so, and read anyway.

Exit codes: 0 clean, 1 a finding of severity error (inspect) or a mismatch (verify), 2 not a
CommitGate data directory.
"""
from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from commitgate.engine.store_files import NotAStore, store_paths
from commitgate.engine.store_inspect import ERROR, StoreReport, inspect_store
from commitgate.engine.store_verify import VerifyResult, verify_store
from commitgate.protocol.record_batch import KafkaBodyFormat

store_app = typer.Typer(help="A data directory, offline: inspect its files, verify every entry.",
                        no_args_is_help=True)
DataDir = Annotated[Path, typer.Argument(help="the broker's data directory (log.dirs)")]
NOT_A_STORE = 2


@store_app.command("inspect")
def inspect_command(
    data_dir: DataDir,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON document on stdout")] = False,
) -> None:
    """Segments, ConsumeQueues, IndexFiles, checkpoint, topics, and where they disagree."""
    try:
        report = inspect_store(data_dir)
    except NotAStore as exc:
        Console(stderr=True).print(f"[red]{exc}[/red]")
        raise typer.Exit(NOT_A_STORE) from None
    if as_json:
        _in_use(Console(stderr=True), report.in_use_by)  # stdout holds the JSON alone
        typer.echo(json.dumps(asdict(report), indent=1))
    else:
        _print_report(Console(), report)
    if any(finding.severity == ERROR for finding in report.findings):
        raise typer.Exit(1)


@store_app.command("verify")
def verify_command(data_dir: DataDir) -> None:
    """Read every CommitLog entry and check its header and CRCs; exit 1 on any mismatch."""
    try:
        store_paths(data_dir)  # before the progress bar: a wrong directory prints no bar
        with Progress(TextColumn("verifying"), BarColumn(), DownloadColumn(),
                      TimeRemainingColumn(), console=Console(stderr=True)) as progress:
            task = progress.add_task("verify", total=None)
            result = verify_store(data_dir, KafkaBodyFormat(),
                                  lambda done, total: progress.update(task, completed=done,
                                                                      total=total))
    except NotAStore as exc:
        Console(stderr=True).print(f"[red]{exc}[/red]")
        raise typer.Exit(NOT_A_STORE) from None
    _print_verify(Console(), result)
    if not result.clean:
        raise typer.Exit(1)


def _relative(path: str, root: str) -> str:
    """Paths inside the data directory, relative to it: short enough for a table."""
    return str(Path(path).relative_to(root)) if Path(path).is_relative_to(root) else path


def _time(ms: int) -> str:
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def _in_use(console: Console, pid: int | None) -> None:
    if pid is not None:
        console.print(f"[yellow]the store is in use by a running broker (pid {pid}): figures "
                      f"may move while they are read, and a problem at the CommitLog's end "
                      f"may be an append in flight[/yellow]")


def _print_report(console: Console, report: StoreReport) -> None:
    root = report.data_dir
    _in_use(console, report.in_use_by)
    console.print(f"data directory {root}: CommitLog [{report.commitlog_start}, "
                  f"{report.commitlog_end})")
    segments = _table("CommitLog segments", "file", "start offset", "size", "written bytes")
    for s in report.segments:
        segments.add_row(_relative(s.file, root), str(s.start_offset), str(s.size),
                         str(s.written_bytes))
    queues = _table("ConsumeQueues", "topic", "partition", "files", "units", "first offset",
                    "last offset", "log start offset", "recorded end")
    for q in report.queues:
        queues.add_row(q.topic, str(q.partition), str(len(q.files)), str(q.units),
                       str(q.first_offset), str(q.end_offset - 1) if q.units else "-",
                       str(q.log_start_offset), str(q.recorded_end))
    index = _table("IndexFiles", "file", "first stored", "last stored", "keys", "capacity")
    for f in report.index_files:
        index.add_row(_relative(f.file, root), _time(f.begin_timestamp), _time(f.end_timestamp),
                      str(f.keys), str(f.capacity))
    topics = _table("Topics", "topic", "id", "partitions", "configs")
    for t in report.topics:
        topics.add_row(t.name, t.topic_id, str(t.partitions),
                       ", ".join(f"{k}={v}" for k, v in sorted(t.configs.items())) or "-")
    for table in (segments, queues, index, _checkpoint_table(report), topics,
                  _findings_table(report)):
        console.print(table)


def _checkpoint_table(report: StoreReport) -> Table:
    table = _table("Checkpoint", "field", "value")
    if report.checkpoint is None:
        table.add_row("-", "missing or damaged")
    else:
        for name, value in asdict(report.checkpoint).items():
            table.add_row(name, str(value))
    return table


def _findings_table(report: StoreReport) -> Table:
    table = _table(f"Consistency: {len(report.findings)} findings", "severity", "file", "offset",
                   "finding")
    for f in report.findings:
        colour = "red" if f.severity == ERROR else "yellow"
        table.add_row(f"[{colour}]{f.severity}[/{colour}]", _relative(f.file, report.data_dir),
                      "-" if f.offset is None else str(f.offset), f.message)
    return table


def _print_verify(console: Console, result: VerifyResult) -> None:
    _in_use(console, result.in_use_by)
    summary = _table("store verify", "data directory", "segments", "entries", "bytes",
                     "CommitLog", "mismatches")
    summary.add_row(result.data_dir, str(result.segments), str(result.entries),
                    str(result.bytes), f"[{result.first_offset}, {result.end_offset})",
                    str(len(result.mismatches)))
    console.print(summary)
    if result.clean:
        return
    table = _table("Mismatches", "segment", "file offset", "CommitLog offset", "problem",
                   "bytes skipped")
    for m in result.mismatches:
        table.add_row(_relative(m.segment, result.data_dir), str(m.file_offset),
                      str(m.commitlog_offset), m.problem, str(m.skipped_bytes))
    console.print(table)


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    return table
