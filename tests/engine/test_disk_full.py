"""A full disk: appends fail with DISK_ERROR, nothing acknowledged is harmed, freeing space heals.

The store runs in ``tests.engine.disk_full_driver`` on a 2 MiB tmpfs mounted in a private mount
namespace (``unshare --mount``), so the host sees no mount and the mount disappears when the
driver exits. The disk fills twice: once when a new CommitLog segment cannot be reserved, once
when a new ConsumeQueue file cannot be written (see the driver's docstring for every step).
Needs root / CAP_SYS_ADMIN; without it the test fails and says so rather than skipping, because
a skipped disk-full test reads like a passed one.
"""
from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TMPFS_SIZE = "2m"
DRIVER_TIMEOUT_S = 90
MOUNT_FAILED = 97


def run_driver(mount_point: Path) -> subprocess.CompletedProcess[str]:
    script = (f"mount -t tmpfs -o size={TMPFS_SIZE} tmpfs {shlex.quote(str(mount_point))} "
              f"|| exit {MOUNT_FAILED}; "
              f"exec {shlex.quote(sys.executable)} -m tests.engine.disk_full_driver "
              f"{shlex.quote(str(mount_point))}")
    command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                          timeout=DRIVER_TIMEOUT_S, check=False)


def summary_of(proc: subprocess.CompletedProcess[str]) -> dict:
    """The driver's JSON summary, or a failure that says why there is none."""
    if proc.returncode == MOUNT_FAILED or proc.stderr.startswith("unshare:"):
        pytest.fail("the disk-full test must mount a tmpfs in a private mount namespace "
                    "(unshare --mount, mount -t tmpfs: root or CAP_SYS_ADMIN), and that was "
                    f"refused here (rc {proc.returncode}):\n{proc.stderr}")
    lines = proc.stdout.strip().splitlines()
    assert lines, f"driver printed nothing (rc {proc.returncode}):\n{proc.stderr[-6000:]}"
    return json.loads(lines[-1])


@pytest.mark.timeout(DRIVER_TIMEOUT_S + 30)
def test_full_disk_fails_appends_cleanly_keeps_acknowledged_data_and_recovers_when_freed(
        tmp_path: Path) -> None:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        pytest.fail("the disk-full test needs util-linux `unshare` and `mount`; not installed")
    mount_point = tmp_path / "tmpfs"
    mount_point.mkdir()
    proc = run_driver(mount_point)
    summary = summary_of(proc)
    problems = "\n".join(summary["problems"])
    context = f"summary: {json.dumps(summary, indent=1)}\nstderr:\n{proc.stderr[-4000:]}"
    assert not summary["problems"], f"store problems on a full disk:\n{problems}\n\n{context}"
    assert proc.returncode == 0, context

    segment, consumequeue = summary["phases"]
    # Each phase really ran out of space, where it was meant to, after acknowledged appends.
    assert segment["kind"] == "segment", context
    assert consumequeue["kind"] == "consumequeue", context
    for phase in (segment, consumequeue):
        assert "No space left on device" in phase["error"], context
        assert 1 < phase["attempts"] < 10_000, context
        assert phase["retries_failed"] == 5, context
    # After freeing space: the failed batch again plus 20 more; after the restarts: 20 more.
    assert segment["after_free_ok"] == 21 and consumequeue["after_free_ok"] == 20, context
    assert set(segment["probe_statuses"]) <= {"OK", "DISK_ERROR"}, context
    assert len(segment["probe_statuses"]) == 4, context
    # Reopens: clean after close, unclean after the crash, clean at the end; and every
    # partition ends exactly where its acknowledged batches end.
    assert [o["clean"] for o in summary["opens"]] == [True, False, True], context
    assert summary["final_ends"] == summary["expected_ends"], context
    assert summary["acked"] > 40 and sum(summary["expected_ends"].values()) > 0, context
    assert summary["index_hits"] == [summary["first_batch"]], context
    # The mount lived only in the driver's namespace.
    assert not any(mount_point.iterdir()), "the tmpfs contents leaked into the host namespace"
