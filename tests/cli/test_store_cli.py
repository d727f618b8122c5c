"""``commitgate store inspect|verify`` as a user runs them (``python -m commitgate``), on copies of a
data directory a real broker wrote (tests/engine/store_data.py); output parsed."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from commitgate.engine.paths import StorePaths
from tests.engine.store_data import (
    RECORDS,
    TOPIC,
    Produced,
    copy_store,
    flip_byte,
    value_byte,
    write_store,
)

RUN_TIMEOUT_S = 120.0  # a bound, never a measurement
WIDE = {**os.environ, "COLUMNS": "400"}  # rich tables on one line a row


@pytest.fixture(scope="module")
def produced(tmp_path_factory) -> Produced:
    return write_store(tmp_path_factory.mktemp("store"))


@pytest.fixture
def copy(produced: Produced, tmp_path: Path) -> Path:
    return copy_store(produced.data_dir, tmp_path / "copy")


def store(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "commitgate", "store", *args], capture_output=True,
                          text=True, env=WIDE, timeout=RUN_TIMEOUT_S, check=False)


def rows(output: str, title: str) -> list[list[str]]:
    """The body rows of the rich table titled ``title``, as cells."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(title))
    table: list[list[str]] = []
    for line in lines[start + 1:]:
        if line.startswith("└"):
            break
        if line.startswith("│"):
            table.append([cell.strip() for cell in line.strip("│").split("│")])
    return table


def test_verify_clean_copy_exits_0_with_the_entry_count(copy: Path) -> None:
    done = store("verify", str(copy))
    assert done.returncode == 0, done.stdout + done.stderr
    [summary] = rows(done.stdout, "store verify")
    _data_dir, _segments, entries, _bytes, _range, mismatches = summary
    assert (int(entries), int(mismatches)) == (RECORDS, 0)


def test_verify_names_file_and_offset_of_a_flipped_byte(copy: Path) -> None:
    segment, pos, phy = value_byte(copy, 2, 33)
    flip_byte(segment, pos)
    done = store("verify", str(copy))
    assert done.returncode == 1, done.stdout + done.stderr
    [mismatch] = rows(done.stdout, "Mismatches")
    name, file_offset, commitlog_offset, problem, _skipped = mismatch
    assert name == str(segment.relative_to(copy))
    assert (int(file_offset), int(commitlog_offset)) == (phy - int(segment.name), phy)
    assert int(file_offset) <= pos < int(file_offset) + 12_000  # the entry holding the byte
    assert "CRC mismatch" in problem


def test_inspect_reports_a_queue_deleted_by_hand(copy: Path) -> None:
    directory = StorePaths(copy).consumequeue_dir(TOPIC, 0)
    shutil.rmtree(directory)
    done = store("inspect", str(copy))
    assert done.returncode == 1, done.stdout + done.stderr
    [finding] = rows(done.stdout, "Consistency")
    severity, file, _offset, message = finding
    assert (severity, file) == ("error", str(directory.relative_to(copy)))
    assert "ConsumeQueue directory is missing" in message


def test_inspect_json_matches_the_produced_offsets(produced: Produced, copy: Path) -> None:
    done = store("inspect", str(copy), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    ends = {q["partition"]: q["end_offset"] for q in report["queues"] if q["topic"] == TOPIC}
    assert ends == produced.ends
    assert report["findings"] == []
    assert report["commitlog_end"] == report["checkpoint"]["commitlog_flushed"] > 0
    assert sum(f["keys"] for f in report["index_files"]) == produced.keys


def test_not_a_data_directory_exits_2(tmp_path: Path) -> None:
    for command in ("inspect", "verify"):
        done = store(command, str(tmp_path))
        assert done.returncode == 2, done.stdout + done.stderr
        assert "not a CommitGate data directory" in done.stderr
