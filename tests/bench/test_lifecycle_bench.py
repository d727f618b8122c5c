"""The log lifecycle benchmark runs end to end at a tiny volume and reports every figure, its
data checks find nothing lost, and its ratios and bound are computed as documented (figures
are not checked: speed is measured with the benchmark itself, never asserted in a test)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commitgate.bench import lifecycle
from commitgate.bench.lifecycle import (
    COMPACTING,
    IDLE,
    RELOCATING,
    Counters,
    DiskSample,
    ProduceSample,
    Report,
    summary,
)
from commitgate.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
MIB = 1 << 20


@pytest.mark.timeout(300)
def test_bench_lifecycle_prints_every_figure(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "commitgate.bench.lifecycle", "--data-dir", str(tmp_path), "--volume-mb", "4",
         "--segment-mb", "1", "--rounds", "1", "--minutes", "3"],
        cwd=ROOT, capture_output=True, text=True, timeout=280, check=False,
        env={**os.environ, "COLUMNS": "400"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    # part 1: a row per mode, the working ones as a share of idle
    for mode in (IDLE, RELOCATING, COMPACTING):
        assert re.search(rf"│ {mode} +│ +[\d,]+ │", out), f"no {mode} row in:\n{out}"
    assert re.search(r"│ relocating +│ +[\d,]+ │ +[\d.]+% of idle", out), out
    assert "relocating: target 80%" in out and "compacting: target 80%" in out
    # part 2: the cleaner's speed at both limits, the compactor's rate
    assert re.search(r"│ raised +│ +[\d,]+ MiB in [\d.]+ s │ +[\d,]+ │ +[\d,]+ │", out), out
    assert "64 MiB/s (default)" in out and "records/s" in out
    # part 3: disk against live data and the bound, said within or over
    assert re.search(r"│ after the last pass +│ +[\d,]+ MiB │.*│ +(within|over) │", out), out
    assert "Disk after 3 simulated minutes" in out
    summary_line = next(line for line in out.splitlines() if line.startswith("lifecycle: "))
    assert "of idle" in summary_line and "MB/s relocated" in summary_line
    assert "x live after 3 simulated minutes" in summary_line
    # the data checks: nothing the cleaner or the compactor moved was lost
    assert "problem" not in out.replace("0 problems", ""), out
    assert summary_line.endswith("0 problems"), summary_line
    assert not any(tmp_path.iterdir()), "the benchmark left files behind"


def test_the_cli_command_passes_its_options_on(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(lifecycle, "main", lambda *args: calls.append(args))
    runner = CliRunner()
    result = runner.invoke(app, ["bench", "lifecycle", "--volume-mb", "8", "--segment-mb", "2",
                                 "--rounds", "1", "--minutes", "5"])
    assert result.exit_code == 0, result.output
    assert calls == [(None, 8, 2, 1, 5)]
    result = runner.invoke(app, ["bench", "lifecycle", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for option in ("--volume-mb", "--segment-mb", "--rounds", "--minutes", "--data-dir"):
        assert option in result.output
    result = runner.invoke(app, ["bench", "lifecycle", "--segment-mb", "0"])
    assert result.exit_code != 0 and not calls[1:]


def _sample(mode: str, speed: float, *, relocated: int = 0) -> ProduceSample:
    return ProduceSample(speed, mode, Counters(relocated_bytes=relocated))


def test_the_ratio_is_the_median_of_the_rounds_own_ratios() -> None:
    """Not best against best: the best working round is the one where the cleaner did least."""
    report = Report()
    report.produce[IDLE] = [_sample(IDLE, 1000), _sample(IDLE, 800), _sample(IDLE, 1000)]
    report.produce[RELOCATING] = [_sample(RELOCATING, 1100, relocated=MIB),  # 110%
                                  _sample(RELOCATING, 560, relocated=3 * MIB),  # 70%
                                  _sample(RELOCATING, 900, relocated=2 * MIB)]  # 90%
    report.produce[COMPACTING] = [_sample(COMPACTING, 500), _sample(COMPACTING, 600),
                                  _sample(COMPACTING, 400)]  # 50%, 75%, 40%
    assert report.round_ratios(RELOCATING) == pytest.approx([1.1, 0.7, 0.9])
    assert report.ratio(RELOCATING) == pytest.approx(0.9)
    assert report.median_round(RELOCATING).during.relocated_bytes == 2 * MIB
    assert report.ratio(COMPACTING) == pytest.approx(0.5)
    assert report.best(COMPACTING).mb_per_s == 600
    line = summary(report)
    assert "relocating 90.0% of idle" in line and "compacting 50.0% of idle" in line
    assert "(target 80%: missed)" in line  # the worse of the two decides
    report.produce[IDLE].append(_sample(IDLE, 1000))  # an even count: the lower middle
    report.produce[RELOCATING].append(_sample(RELOCATING, 800, relocated=4 * MIB))  # 80%
    assert report.median_round(RELOCATING).during.relocated_bytes == 4 * MIB


def test_counters_subtract_and_the_bound_says_within_or_over() -> None:
    after = Counters(10, 2, 1, 1, 3, 4)
    assert after - Counters(4, 1, 1, 0, 0, 0) == Counters(6, 1, 0, 1, 3, 4)
    assert not Counters().any and after.any
    inside = DiskSample(1.0, commitlog=6 * MIB, consumequeue=MIB, live=2 * MIB,
                        bound=2 * 2 * MIB + 3 * MIB)
    assert inside.used == 7 * MIB and inside.within
    outside = DiskSample(1.0, commitlog=7 * MIB, consumequeue=MIB, live=2 * MIB,
                         bound=2 * 2 * MIB + 3 * MIB)
    assert not outside.within
