"""``commitgate compat --reference``: a one-cell matrix (kafka-python, nulls) against the module's
broker, compared with a hand-made reference run; the exit status is the run's as before."""
from __future__ import annotations

import json

from typer.testing import CliRunner

from commitgate.cli.app import app
from commitgate.compat_tests.report import load_matrix

RUNNER = CliRunner(env={"COLUMNS": "250"})


def _reference(path, nulls: dict) -> None:
    """A compat.json where kafka-python's nulls cell is ``nulls`` and a client ran that ours
    does not."""
    path.write_text(json.dumps({
        "bootstrap": "127.0.0.1:9092", "broker": "Apache Kafka (reference)",
        "scenarios": ["nulls"], "clients": [
            {"name": "kafka-python", "language": "python", "version": "3.0.12",
             "cells": {"nulls": nulls}},
            {"name": "kcat", "language": "c", "version": "1.7.1",
             "cells": {"nulls": {"status": "pass", "detail": "", "seconds": 0.2}}}]}))


def test_compat_lists_the_cells_that_differ_from_the_reference(broker, tmp_path):
    reference = tmp_path / "reference.json"
    _reference(reference, {"status": "fail", "detail": "reference broke", "seconds": 1.0})
    out = tmp_path / "out"
    result = RUNNER.invoke(app, ["compat", "--bootstrap", broker.bootstrap, "--out", str(out),
                                 "--clients", "kafka-python", "--scenarios", "nulls",
                                 "--reference", str(reference)])
    assert result.exit_code == 0, result.output
    [client] = load_matrix(out / "compat.json").clients
    assert client.cells["nulls"].status == "pass", client.cells
    rows = [line.replace("│", " ").split() for line in result.output.splitlines()
            if line.startswith(("│ kafka-python ", "│ kcat "))]
    # kcat was not run: its reference cell is not held against this run
    assert rows == [["kafka-python", "nulls", "fail", "pass", "reference:", "reference",
                     "broke"]]
    report = (out / "compat.md").read_text()
    assert "| kafka-python | nulls | fail | pass | reference: reference broke |" in report
    assert "| kcat |" not in report


def test_compat_refuses_an_unreadable_reference_before_running(broker, tmp_path):
    missing = tmp_path / "nowhere.json"
    result = RUNNER.invoke(app, ["compat", "--bootstrap", broker.bootstrap,
                                 "--out", str(tmp_path / "out"), "--reference", str(missing)])
    assert result.exit_code == 2, result.output
    assert "is not a compat.json of a matrix run" in result.output
    assert not (tmp_path / "out").exists()
