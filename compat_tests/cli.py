"""``commitgate compat``: the matrix against a fresh CommitGate or a broker given by address."""
from __future__ import annotations

import tempfile
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from compat_tests.matrix import CROSS, Cell, Matrix, clients_named, run_matrix, scenarios_named
from compat_tests.report import counts, failures, rich_table, write_all
from gateway.launcher import BrokerProcess


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
        scenarios: list[str] | None) -> Matrix:
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
    for path in write_all(matrix, out):
        console.print(f"wrote {path}")
    return matrix
