"""ConsumeQueueWriter: writes pages of ConsumeQueue units off the appending thread (RocketMQ's
ReputMessageService writes them off the append path too).

A queue's units wait in memory until a page of them gathers (see ConsumeQueue). Written by
the appending thread, that page's ``pwrite`` changes the queue file's mtime, which needs an
ext4 journal handle, and while a CommitLog ``fdatasync`` commits the journal that handle
waits: with 10,000 partitions the pages of many queues fill at once and the event loop stopped
for 8-92 ms per write, about a third of a second in a 2 s benchmark window.

The writes run on a C thread (``engine/_write_thread.c``) that never takes the GIL; a Python
thread doing them cost the appending thread a GIL hand-off per page and took 64 KiB appends
from 2,957 to 1,633 MB/s. Everything else stays on the event loop: the queue hands over a copy
of its pending units and the files they go to (resolved through the handle cache, which only
the loop touches), and the loop applies the outcomes it polls for (``apply_done``): the units
leave ``pending``, where they stayed readable, and the files' written positions move. A failed
write leaves the units pending. A file being written is pinned (``in_flight``) so the handle
cache does not close it under the thread. Without the C helper there is no writer: pages are
written inline, as before.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.mapped_file import MappedFile

try:
    from engine._write_thread import WriteThread
except ImportError:  # installed without a C compiler
    WriteThread = None

if TYPE_CHECKING:
    from engine.consume_queue import ConsumeQueue

log = logging.getLogger(__name__)


@dataclass(slots=True)
class UnitWrite:
    """One queue's pending units from its ``pending_from``: ``length`` bytes in ``chunks``
    (a file, the position in it, the bytes)."""

    queue: ConsumeQueue
    length: int
    chunks: list[tuple[MappedFile, int, bytes | memoryview]]
    error: OSError | None = None


class ConsumeQueueWriter:
    def __init__(self) -> None:
        self._thread = WriteThread()
        self._jobs: dict[int, UnitWrite] = {}
        self._next_id = 0

    @staticmethod
    def available() -> bool:
        return WriteThread is not None

    def submit(self, job: UnitWrite) -> None:
        """Hand a write to the thread (loop thread; the queue has pinned its files)."""
        self._next_id += 1
        self._jobs[self._next_id] = job
        self._thread.submit(self._next_id, [(mapped.fileno(), at, chunk)
                                            for mapped, at, chunk in job.chunks])

    def wait(self) -> None:
        """Block until every submitted write is done and applied (loop thread): before a
        queue's units are cut, written synchronously or its files deleted."""
        self._thread.wait()
        self.apply_done()

    def stop(self) -> None:
        self._thread.close()
        self.apply_done()

    def apply_done(self) -> None:
        """Apply the outcome of every finished write (loop thread; never blocks)."""
        for job_id, errno in self._thread.finished():
            job = self._jobs.pop(job_id)
            if errno:
                job.error = OSError(errno, os.strerror(errno))
                log.error("%s: writing %d bytes of units failed, kept in memory for a retry: "
                          "%s", job.queue, job.length, job.error)
            job.queue.written(job)
