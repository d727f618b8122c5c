"""``commitgate compat``: the matrix against a fresh CommitGate or a broker given by address, and
where its verdicts differ from a reference run's."""
from __future__ import annotations

import tempfile
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from commitgate.compat_tests.matrix import (
    CROSS,
    Cell,
    Matrix,
    clients_named,
    run_matrix,
    scenarios_named,
)
from commitgate.compat_tests.report import (
    counts,
    differences,
    differences_table,
    failures,
    load_matrix,
    rich_table,
    write_all,
)
from commitgate.launcher import BrokerProcess


@contextmanager
def broker_at(bootstrap: str | None):
    """The address to test, and what it is: a broker given by address, or a fresh CommitGate."""
    if bootstrap is not None:
        yield bootstrap, "broker given by address"
        return
    with tempfile.TemporaryDirectory(prefix="commitgate-compat-broker-") as root, \
            BrokerProcess(Path(root) / "data", {"num.partitions": "1"}) as broker:
        yield broker.bootstrap, "CommitGate (fresh, started by the command)"


def run(bootstrap: str | None, out: Path, clients: list[str] | None,
        scenarios: list[str] | None, reference_file: Path | None = None) -> Matrix:
    """Run the matrix, print it (and the cells that differ from ``reference_file``'s, a
    compat.json), write the reports. ValueError: an unknown name or an unreadable reference,
    before anything runs."""
    reference = load_matrix(reference_file) if reference_file is not None else None
    console = Console()
    cross = scenarios is None or CROSS in scenarios
    total = len(clients_named(clients)) * (len(scenarios_named(scenarios)) + cross)
    with broker_at(bootstrap) as (address, broker), Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), console=console) as progress:
        task = progress.add_task("starting", total=total)

        def on_cell(client: str, scenario: str, cell: Cell) -> None:
            progress.update(task, advance=1, description=f"{client}: {scenario} {cell.status}")
        matrix = run_matrix(address, broker, clients, scenarios, on_cell)
    console.print(rich_table(matrix))
    for client, scenario, cell in failures(matrix):
        if cell.status == "fail":
            console.print(f"[red]{client} / {scenario}[/]: {cell.detail}")
    console.print(", ".join(f"{n} {s}" for s, n in counts(matrix).items()))
    if reference is not None:
        diffs = differences(matrix, reference)
        console.print(differences_table(diffs, reference) if diffs else
                      f"every cell has the verdict of the reference ({reference.broker})")
    for path in write_all(matrix, out, reference):
        console.print(f"wrote {path}")
    return matrix
