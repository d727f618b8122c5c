"""``--profile-broker``: py-spy watches CommitGate while a workload runs again (after the timed
rounds, so the sampling costs no measured figure), and writes a flame graph (SVG) plus the
functions that held the most samples (text) per workload."""
from __future__ import annotations

import collections
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from commitgate.bench.targets import Target
from commitgate.bench.workloads import Measurement, Workload

SAMPLES_PER_S = 200
TOP = 15
ROOT = f"{Path(__file__).resolve().parents[1]}/"
FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")


def _spy(pid: int, path: Path, form: str) -> subprocess.Popen:
    return subprocess.Popen(["py-spy", "record", "--pid", str(pid), "--output", str(path),
                             "--format", form, "--rate", str(SAMPLES_PER_S), "--nonblocking"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def record(target: Target, workloads: list[Workload],
           measure: Callable[[Target, Workload, int], Measurement], out: Path, seconds: float,
           console: Console) -> None:
    if shutil.which("py-spy") is None or target.pid is None:
        console.print("[yellow]py-spy not installed (pip install py-spy): no flame graphs[/]")
        return
    for workload in workloads:
        stem = out / f"flame-{re.sub(r'[^a-z0-9]+', '-', workload.name.lower()).strip('-')}"
        spies = [_spy(target.pid, stem.with_suffix(".svg"), "flamegraph"),
                 _spy(target.pid, stem.with_suffix(".txt.raw"), "raw")]
        time.sleep(0.5)  # attached before the load starts
        deadline, index = time.monotonic() + seconds, 1000
        while index == 1000 or time.monotonic() < deadline:  # at least once, ``seconds`` in all
            measure(target, workload, index)
            index += 1
        for spy in spies:
            spy.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
            _, err = spy.communicate(timeout=60)
            if spy.returncode:
                console.print(f"[yellow]py-spy: {err.decode(errors='replace')[-300:]}[/]")
        raw = stem.with_suffix(".txt.raw")
        if raw.exists():
            summary = summarize(raw.read_text())
            stem.with_suffix(".txt").write_text(summary)
            raw.unlink()
            console.print(f"[bold]{workload.name}[/], CommitGate's samples:\n{summary}")
        console.print(f"wrote {stem.with_suffix('.svg')}")


def summarize(collapsed: str) -> str:
    """Top functions by samples on the CPU in them (self) and under them (total), from
    py-spy's collapsed stacks: ``frame;frame;... count`` a line, ``function (file:line)``."""
    own: collections.Counter[str] = collections.Counter()
    under: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = [_function(frame) for frame in stack.split(";")]
        total += int(count)
        own[frames[-1]] += int(count)
        for frame in set(frames):
            under[frame] += int(count)
    if not total:
        return "no samples\n"
    lines = [f"{total} samples; self (on the CPU in the function):"]
    lines += [f"  {n / total:6.1%}  {name}" for name, n in own.most_common(TOP)]
    lines.append("total (in the function or below it):")
    lines += [f"  {n / total:6.1%}  {name}" for name, n in under.most_common(TOP)]
    return "\n".join(lines) + "\n"


def _function(frame: str) -> str:
    """``handle (gateway/handlers/produce.py:42)`` -> ``gateway/handlers/produce.py:handle``."""
    match = FRAME.match(frame)
    if match is None:
        return frame
    path = match["file"]
    for marker in ("/site-packages/", ROOT, "/lib/python3"):
        path = path.split(marker, 1)[-1]
    return f"{path}:{match['function']}"
