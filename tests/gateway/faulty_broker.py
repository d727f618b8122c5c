"""``python -m tests.gateway.faulty_broker serve ...``: the normal broker with faults injected
on demand, for tests that need a disk or a background service to fail in the real process.

Faults are marker files in the directory named by ``COMMITGATE_FAULTS``:
- ``fdatasync-commitlog``: while it exists, fdatasync of a CommitLog segment fails with EIO.
- ``raise-<task>``: the next step of that background task raises RuntimeError; the marker is
  removed when it fires (one shot). Tasks and steps are listed in ``STEPS``.
- ``exit-before-markers`` / ``exit-after-markers``: the process dies at once (as by SIGKILL)
  when the transaction coordinator is about to write a finished transaction's markers, or
  has written them but not yet logged the transaction complete.
"""
from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path

from commitgate.cli.app import app
from commitgate.engine.allocate_mapped_file_service import AllocateMappedFileService
from commitgate.engine.commit_log import CommitLog
from commitgate.engine.flush_commit_log_service import FlushCommitLogService
from commitgate.engine.flush_consume_queue_service import FlushConsumeQueueService
from commitgate.engine.group_commit_service import GroupCommitService
from commitgate.engine.index_builder import IndexBuilder
from commitgate.gateway.groups.offsets import OffsetManager
from commitgate.gateway.producer_snapshot_service import ProducerSnapshotService
from commitgate.gateway.transactions.markers import MarkerWriter

FAULTS = Path(os.environ.get("COMMITGATE_FAULTS", "/nonexistent"))

STEPS = {
    "group-commit": (GroupCommitService, "_sync_round"),
    "flush-commitlog": (FlushCommitLogService, "_flush"),
    "flush-consumequeue": (FlushConsumeQueueService, "flush"),
    "retention": (CommitLog, "recheck_space"),
    "index-builder": (IndexBuilder, "_index_some_or_stall"),
    "allocate-mapped-file": (AllocateMappedFileService, "_create"),
    "producer-snapshots": (ProducerSnapshotService, "round"),
    "offset-expiry": (OffsetManager, "expire"),
}


def _fires(task: str) -> None:
    marker = FAULTS / f"raise-{task}"
    if marker.exists():
        marker.unlink(missing_ok=True)
        raise RuntimeError(f"injected fault in {task}")


def _inject(task: str, cls: type, name: str) -> None:
    original = getattr(cls, name)
    if asyncio.iscoroutinefunction(original):
        async def step(self, *args, **kwargs):
            _fires(task)
            return await original(self, *args, **kwargs)
    else:
        def step(self, *args, **kwargs):
            _fires(task)
            return original(self, *args, **kwargs)
    setattr(cls, name, step)


def _failing_fdatasync() -> None:
    real = os.fdatasync
    marker = FAULTS / "fdatasync-commitlog"

    def fdatasync(fd: int) -> None:
        if marker.exists() and "/commitlog/" in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real(fd)
    os.fdatasync = fdatasync


def _dying_marker_writer() -> None:
    original = MarkerWriter.__call__

    async def write(self, *args, **kwargs):
        if (FAULTS / "exit-before-markers").exists():
            os._exit(9)
        done = await original(self, *args, **kwargs)
        if (FAULTS / "exit-after-markers").exists():
            os._exit(9)
        return done
    MarkerWriter.__call__ = write


if __name__ == "__main__":
    _failing_fdatasync()
    _dying_marker_writer()
    for task, (cls, name) in STEPS.items():
        _inject(task, cls, name)
    app()
