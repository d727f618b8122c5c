"""Commands that hand their arguments to another module's own parser: `pipeline demo` (the
demo's typer app, imported only when run) and the argparse benchmarks under `bench`."""
from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(("command", "expected"), [
    (["pipeline", "demo", "--help"], "--output-mode"),
    (["bench", "udp", "--help"], "--rates"),
    (["bench", "admin", "--help"], "--scrape"),
    (["bench", "query", "--help"], "--records"),
])
def test_help_is_the_modules_own(command, expected, tmp_path):
    # run outside the checkout: only the installed import root resolves, never a bare folder name
    out = subprocess.run([sys.executable, "-m", "commitgate", *command], capture_output=True,
                         text=True, timeout=300, env={"COLUMNS": "200", "PATH": ""}, check=False,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert expected in out.stdout


def test_the_broker_commands_do_not_import_pyspark(tmp_path):
    probe = "import sys, commitgate.cli.app; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, check=True, cwd=tmp_path)
    assert out.stdout.strip() == "False"
