"""The matrix as a terminal table (rich), JSON, Markdown and a self-contained HTML page."""
from __future__ import annotations

import html
import json
from pathlib import Path

from rich.table import Table

from compat_tests.matrix import Cell, Matrix

STYLE = {"pass": "green", "fail": "red", "n/a": "dim", "skipped": "yellow"}
COLOUR = {"pass": "#c8f7c5", "fail": "#f7c5c5", "n/a": "#e6e6e6", "skipped": "#f7edc5"}
DETAIL_CHARS = 160


def label(cell: Cell) -> str:
    timing = f" {cell.seconds:.1f}s" if cell.status in ("pass", "fail") else ""
    return cell.status + timing


def counts(matrix: Matrix) -> dict[str, int]:
    out = {status: 0 for status in STYLE}
    for client in matrix.clients:
        for cell in client.cells.values():
            out[cell.status] += 1
    return out


def rich_table(matrix: Matrix) -> Table:
    table = Table(title=f"CommitGate compatibility matrix: {matrix.broker} at {matrix.bootstrap}")
    table.add_column("scenario")
    for client in matrix.clients:
        table.add_column(f"{client.name}\n{client.version}", justify="center")
    for scenario in matrix.scenarios:
        row = []
        for client in matrix.clients:
            cell = client.cells.get(scenario, Cell("skipped", "not run"))
            row.append(f"[{STYLE[cell.status]}]{label(cell)}[/]")
        table.add_row(scenario, *row)
    return table


def failures(matrix: Matrix) -> list[tuple[str, str, Cell]]:
    return [(c.name, s, cell) for c in matrix.clients for s, cell in c.cells.items()
            if cell.status in ("fail", "skipped", "n/a") and cell.detail]


def markdown(matrix: Matrix) -> str:
    names = [f"{c.name} {c.version}".strip() for c in matrix.clients]
    lines = [(f"Broker: {matrix.broker} ({matrix.bootstrap}). Cells: status and time; the notes "
              "below the table give each failure's first error line and each not-applicable "
              "or skipped cell's reason."), "",
             "| scenario | " + " | ".join(names) + " |",
             "| --- | " + " | ".join("---" for _ in names) + " |"]
    notes = {}
    for scenario in matrix.scenarios:
        row = []
        for client in matrix.clients:
            cell = client.cells.get(scenario, Cell("skipped", "not run"))
            text = label(cell)
            if cell.detail:
                notes.setdefault((cell.status, cell.detail), len(notes) + 1)
                text += f" [{notes[(cell.status, cell.detail)]}]"
            row.append(text)
        lines.append(f"| {scenario} | " + " | ".join(row) + " |")
    lines.append("")
    for (status, detail), number in notes.items():
        lines.append(f"{number}. {status}: {_md(detail[:DETAIL_CHARS])}")
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def html_page(matrix: Matrix) -> str:
    head = "".join(f"<th>{html.escape(c.name)}<br><small>{html.escape(c.version)}</small></th>"
                   for c in matrix.clients)
    rows = []
    for scenario in matrix.scenarios:
        cells = []
        for client in matrix.clients:
            cell = client.cells.get(scenario, Cell("skipped", "not run"))
            detail = html.escape(cell.detail[:DETAIL_CHARS])
            cells.append(f'<td style="background:{COLOUR[cell.status]}" title="{detail}">'
                         f"{html.escape(label(cell))}"
                         + (f"<br><small>{detail}</small>" if detail else "") + "</td>")
        rows.append(f"<tr><th>{html.escape(scenario)}</th>{''.join(cells)}</tr>")
    total = ", ".join(f"{n} {s}" for s, n in counts(matrix).items())
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>CommitGate compatibility matrix</title>
<style>body{{font-family:sans-serif;margin:1.5em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #999;padding:4px 6px;vertical-align:top;font-size:13px}}
td small{{display:block;max-width:18em;color:#333}}</style></head><body>
<h1>CommitGate compatibility matrix</h1>
<p>Broker: {html.escape(matrix.broker)} at {html.escape(matrix.bootstrap)}. {total}.</p>
<table><tr><th>scenario</th>{head}</tr>
{chr(10).join(rows)}
</table></body></html>
"""


def write_all(matrix: Matrix, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    files = {"compat.json": json.dumps(matrix.to_json(), indent=2) + "\n",
             "compat.md": markdown(matrix), "compat.html": html_page(matrix)}
    for name, text in files.items():
        (out / name).write_text(text)
    return [out / name for name in files]
