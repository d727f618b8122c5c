"""The matrix as a terminal table (rich), JSON, Markdown and a self-contained HTML page, and
where its verdicts differ from a reference run's (``compat.json`` of, say, Apache Kafka)."""
from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path

from rich.table import Table

from commitgate.compat_tests.matrix import Cell, ClientResult, Matrix

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


ABSENT = "absent"  # the verdict of a cell one of the two runs does not have


@dataclass(frozen=True)
class Difference:
    """A cell whose verdict differs between a reference run and this one."""

    client: str
    scenario: str
    reference: str  # the reference's status, or ABSENT
    ours: str  # this run's status, or ABSENT
    detail: str


def load_matrix(path: Path) -> Matrix:
    """A matrix from the ``compat.json`` that ``write_all`` wrote; ValueError names the file."""
    try:
        data = json.loads(path.read_text())
        clients = [ClientResult(c["name"], c["language"], c.get("version", ""),
                                {s: Cell(**cell) for s, cell in c["cells"].items()})
                   for c in data["clients"]]
        return Matrix(data["bootstrap"], data["broker"], list(data["scenarios"]), clients)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path} is not a compat.json of a matrix run: {exc}") from None


def _cells(matrix: Matrix) -> dict[tuple[str, str], Cell]:
    return {(c.name, s): cell for c in matrix.clients for s, cell in c.cells.items()}


def differences(matrix: Matrix, reference: Matrix) -> list[Difference]:
    """Every cell whose status differs from the reference's, or that only one run has; in the
    order of this run's clients and scenarios, then the reference's own. A run of some clients
    or scenarios (``--clients``, ``--scenarios``) is held against those only."""
    ours, theirs = _cells(matrix), _cells(reference)
    clients, scenarios = {c.name for c in matrix.clients}, set(matrix.scenarios)
    keys = list(ours) + [key for key in theirs if key not in ours
                         and key[0] in clients and key[1] in scenarios]
    out = []
    for key in keys:
        mine, ref = ours.get(key), theirs.get(key)
        if mine is not None and ref is not None and mine.status == ref.status:
            continue
        detail = mine.detail if mine is not None and mine.detail else \
            f"reference: {ref.detail}" if ref is not None and ref.detail else ""
        out.append(Difference(*key, ref.status if ref else ABSENT,
                              mine.status if mine else ABSENT, detail))
    return out


def differences_table(diffs: list[Difference], reference: Matrix) -> Table:
    table = Table(title=f"Verdicts that differ from the reference: {reference.broker}")
    for column in ("client", "scenario", "reference", "CommitGate", "detail"):
        table.add_column(column)
    for d in diffs:
        table.add_row(d.client, d.scenario, _styled(d.reference), _styled(d.ours),
                      d.detail[:DETAIL_CHARS])
    return table


def _styled(status: str) -> str:
    return f"[{STYLE[status]}]{status}[/]" if status in STYLE else status


def _differences_markdown(diffs: list[Difference], reference: Matrix) -> list[str]:
    lines = ["", f"## Against the reference: {_md(reference.broker)}", ""]
    if not diffs:
        return lines + ["Every cell has the reference's verdict."]
    lines += ["| client | scenario | reference | CommitGate | detail |",
              "| --- | --- | --- | --- | --- |"]
    return lines + [f"| {d.client} | {d.scenario} | {d.reference} | {d.ours} | "
                    f"{_md(d.detail[:DETAIL_CHARS])} |" for d in diffs]


def _differences_html(diffs: list[Difference], reference: Matrix) -> str:
    head = f"<h2>Against the reference: {html.escape(reference.broker)}</h2>"
    if not diffs:
        return head + "<p>Every cell has the reference's verdict.</p>"
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(text)}</td>" for text in (
            d.client, d.scenario, d.reference, d.ours, d.detail[:DETAIL_CHARS])) + "</tr>"
        for d in diffs)
    return (f"{head}<table><tr><th>client</th><th>scenario</th><th>reference</th>"
            f"<th>CommitGate</th><th>detail</th></tr>{rows}</table>")


def markdown(matrix: Matrix, reference: Matrix | None = None) -> str:
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
    if reference is not None:
        lines += _differences_markdown(differences(matrix, reference), reference)
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def html_page(matrix: Matrix, reference: Matrix | None = None) -> str:
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
    compared = "" if reference is None else \
        _differences_html(differences(matrix, reference), reference)
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>CommitGate compatibility matrix</title>
<style>body{{font-family:sans-serif;margin:1.5em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #999;padding:4px 6px;vertical-align:top;font-size:13px}}
td small{{display:block;max-width:18em;color:#333}}</style></head><body>
<h1>CommitGate compatibility matrix</h1>
<p>Broker: {html.escape(matrix.broker)} at {html.escape(matrix.bootstrap)}. {total}.</p>
<table><tr><th>scenario</th>{head}</tr>
{chr(10).join(rows)}
</table>{compared}</body></html>
"""


def write_all(matrix: Matrix, out: Path, reference: Matrix | None = None) -> list[Path]:
    """compat.json (this run only, so it can be a later run's reference), compat.md and
    compat.html (with the differences from ``reference`` when given)."""
    out.mkdir(parents=True, exist_ok=True)
    files = {"compat.json": json.dumps(matrix.to_json(), indent=2) + "\n",
             "compat.md": markdown(matrix, reference),
             "compat.html": html_page(matrix, reference)}
    for name, text in files.items():
        (out / name).write_text(text)
    return [out / name for name in files]
