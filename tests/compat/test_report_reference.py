"""The matrix against a reference run (``commitgate compat --reference``): which cells differ,
which only one run has, and how the reports show them. Hand-made matrices, no broker."""
from __future__ import annotations

import json

import pytest

from commitgate.compat_tests.matrix import Cell, ClientResult, Matrix
from commitgate.compat_tests.report import (
    ABSENT,
    Difference,
    differences,
    html_page,
    load_matrix,
    markdown,
    write_all,
)


def _matrix(broker: str, cells: dict[str, dict[str, Cell]]) -> Matrix:
    scenarios = sorted({s for by_scenario in cells.values() for s in by_scenario})
    return Matrix("127.0.0.1:9092", broker, scenarios,
                  [ClientResult(name, "python", "1.0", by_scenario)
                   for name, by_scenario in cells.items()])


@pytest.fixture
def ours() -> Matrix:
    return _matrix("CommitGate", {
        "kafka-python": {"nulls": Cell("pass", seconds=0.3),
                         "group": Cell("fail", "read 30 records, want 37", 9.0),
                         "codec-zstd": Cell("n/a", "no zstd")},
        "kcat": {"nulls": Cell("pass", seconds=0.2),
                 "transactions": Cell("n/a", "cannot abort")}})


@pytest.fixture
def kafka() -> Matrix:
    return _matrix("Apache Kafka 4.1.0", {
        "kafka-python": {"nulls": Cell("pass", seconds=0.4),
                         "group": Cell("pass", seconds=8.0),
                         "codec-zstd": Cell("n/a", "no zstd"),
                         "transactions": Cell("fail", "fenced", 1.0)},
        "java-4.3": {"nulls": Cell("pass", seconds=2.0)}})


def test_only_differing_and_one_sided_cells_are_listed(ours, kafka):
    # java-4.3 is not in this run: its reference cells are not held against it
    assert differences(ours, kafka) == [
        Difference("kafka-python", "group", "pass", "fail", "read 30 records, want 37"),
        Difference("kcat", "nulls", ABSENT, "pass", ""),
        Difference("kcat", "transactions", ABSENT, "n/a", "cannot abort"),
        Difference("kafka-python", "transactions", "fail", ABSENT, "reference: fenced"),
    ]
    assert differences(ours, ours) == []


def test_reports_carry_the_differences(ours, kafka, tmp_path):
    written = write_all(ours, tmp_path, kafka)
    text = (tmp_path / "compat.md").read_text()
    assert "## Against the reference: Apache Kafka 4.1.0" in text
    assert "| kafka-python | group | pass | fail | read 30 records, want 37 |" in text
    assert "| kcat | transactions | absent | n/a | cannot abort |" in text
    assert "java-4.3" not in text  # not in this run
    page = (tmp_path / "compat.html").read_text()
    assert "<td>kafka-python</td><td>transactions</td><td>fail</td><td>absent</td>" in page
    # compat.json stays this run alone, so that it can serve as a later run's reference
    assert load_matrix(tmp_path / "compat.json") == ours
    assert json.loads((tmp_path / "compat.json").read_text()) == ours.to_json()
    assert len(written) == 3
    assert "Every cell has the reference's verdict." in markdown(ours, ours)
    assert "Against the reference" not in markdown(ours) + html_page(ours)


def test_an_unreadable_reference_is_a_value_error_naming_the_file(tmp_path):
    bad = tmp_path / "compat.json"
    bad.write_text('{"clients": []}')
    with pytest.raises(ValueError, match=f"{bad} is not a compat.json of a matrix run"):
        load_matrix(bad)
    with pytest.raises(ValueError, match="is not a compat.json"):
        load_matrix(tmp_path / "missing.json")
