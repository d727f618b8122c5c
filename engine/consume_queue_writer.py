"""ConsumeQueueWriter: writes ConsumeQueue units on a thread of its own (RocketMQ's
ReputMessageService writes them off the append path too).

A queue's units wait in memory until a page of them gathers (see ConsumeQueue); the appending
thread used to write that page itself. A ``pwrite`` to a queue file changes its mtime, which
needs an ext4 journal handle, and while a CommitLog ``fdatasync`` is committing the journal
that handle waits: with 10,000 partitions the pages of many queues fill at once and the event
loop stopped for 8-92 ms per write, about a third of a second in a 2 s benchmark window.

Everything but the write itself stays on the event loop: the queue hands over a copy of its
pending units and the files they go to (resolved through the handle cache, which only the loop
touches), the thread writes them, and the loop applies the outcome: the units leave ``pending``
(they stayed readable there meanwhile) and the files' written positions move. A failed write
leaves the units pending for the next attempt. A file being written is pinned (``in_flight``)
so the handle cache does not close it under the thread.
"""
from __future__ import annotations

import asyncio
import collections
import logging
import queue
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.mapped_file import MappedFile

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
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._jobs: queue.Queue[UnitWrite | None] = queue.Queue()
        self._done: collections.deque[UnitWrite] = collections.deque()
        self._thread = threading.Thread(target=self._run, name="consumequeue-writer",
                                        daemon=True)
        self._thread.start()

    def submit(self, job: UnitWrite) -> None:
        """Hand a write to the thread (loop thread; the queue has pinned its files)."""
        self._jobs.put(job)

    def wait(self) -> None:
        """Block until every submitted write is done and applied (loop thread): before a
        queue's units are cut, written synchronously or its files deleted."""
        self._jobs.join()
        self.apply_done()

    def stop(self) -> None:
        self._jobs.put(None)
        self._thread.join()
        self.apply_done()

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                for mapped, at, chunk in job.chunks:
                    mapped.write_at(at, (chunk,), len(chunk))
            except OSError as exc:
                job.error = exc
            self._done.append(job)
            self._jobs.task_done()
            try:
                self._loop.call_soon_threadsafe(self.apply_done)
            except RuntimeError:  # the loop is closed: stop() or wait() applies it
                pass

    def apply_done(self) -> None:
        """Apply the outcome of every finished write (loop thread; never blocks)."""
        while self._done:
            job = self._done.popleft()
            if job.error is not None:
                log.error("%s: writing %d bytes of units failed, kept in memory for a retry: "
                          "%s", job.queue, job.length, job.error)
            job.queue.written(job)
