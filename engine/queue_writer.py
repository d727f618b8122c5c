"""QueueWriter: writes many ConsumeQueues' pending units at once, on two threads.

A drain of every queue (the thorough flush round, a store's close) makes one pwrite per queue
with units pending, each to a file of its own. With 10,000 partitions the kernel's share of
those writes dominates: most land in a page the file does not have yet, which the kernel
allocates and zeroes, and on a VM whose free memory went back to its host, that first touch
faults in the host too (perf: 48% of the writes' time in the zeroing memset). Measured with
10,000 files, 5 KiB each, synced between rounds, in C: 90-156 ms on one thread, 65-124 ms on
two (four rounds each, alternating). So the calling thread writes half of a batch while one
helper thread writes the other half, each in one pwrite_all call that holds no GIL (in C,
engine/_queue_core.c): with the GIL taken back between writes, as os.pwritev does, two
threads measured no faster than one (the GIL's hand-offs wake the other vCPU every time).

The caller prepares the writes (files opened or created, on its own thread) and keeps them
valid until ``run`` returns: the descriptors must stay open and the buffers unchanged. Most
queues make one write to a file already open; those come as flat lists (``TailWrites``, made
by engine.queue_core.tail_writes), the others as UnitWrites.
"""
from __future__ import annotations

import errno
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from commitgate.engine.mapped_file import MappedFile
from commitgate.native import c_helpers

# Fewer writes than this go on the calling thread alone: handing work to the helper costs
# tens of microseconds, a few writes' worth.
PARALLEL_FROM = 16


@dataclass(slots=True)
class UnitWrite:
    """One pwrite of a queue's pending units into one of its files."""

    file: MappedFile
    at: int
    data: memoryview
    error: OSError | None = None  # a full disk, say: for the caller to report

    def run(self) -> None:
        """Write now, on this thread."""
        try:
            self.file.write_at(self.at, (self.data,), len(self.data))
        except OSError as exc:
            self.error = exc


@dataclass(slots=True)
class TailWrites:
    """One write for each of many queues, as flat lists; ``errors`` (errno per write, 0 when
    written whole) once QueueWriter.run returns."""

    fds: list[int] = field(default_factory=list)
    buffers: list[memoryview] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    files: list[MappedFile] = field(default_factory=list)
    errors: list[int] = field(default_factory=list)

    def pwrite(self, part: slice) -> list[int]:
        return pwrite_all(self.fds[part], self.buffers[part], self.offsets[part])


def write_error(error: int, mapped: MappedFile, at: int, length: int) -> OSError:
    return OSError(error, f"{mapped.path}: {os.strerror(error)} writing {length} bytes at {at}")


def _pwrite_all(fds: list[int], buffers: list[memoryview], offsets: list[int]) -> list[int]:
    """engine._queue_core.pwrite_all in Python, for installs without a C compiler."""
    errors = []
    for fd, data, offset in zip(fds, buffers, offsets, strict=True):
        if offset < 0:  # pwrite(2)'s answer; os.pwritev would write at the file position
            errors.append(errno.EINVAL)
            continue
        try:
            errors.append(0 if os.pwritev(fd, (data,), offset) == len(data) else errno.ENOSPC)
        except OSError as exc:
            errors.append(exc.errno)
    return errors


pwrite_all = c_helpers.pick("engine._queue_core", "pwrite_all", _pwrite_all)


def _run_all(queues: list[list[UnitWrite]]) -> None:
    """Every queue's writes in order: its first ones together, then the second ones of the
    queues whose first succeeded, and so on (a write after a failed one would leave a hole)."""
    live = [writes for writes in queues if writes]
    step = 0
    while live:
        _pwrite([writes[step] for writes in live])
        step += 1
        live = [writes for writes in live if len(writes) > step and writes[step - 1].error is None]


def _run_part(queues: list[list[UnitWrite]], tails: TailWrites, part: slice) -> list[int]:
    _run_all(queues)
    return tails.pwrite(part)


def _pwrite(writes: list[UnitWrite]) -> None:
    errors = pwrite_all([write.file.fileno() for write in writes],
                        [write.data for write in writes], [write.at for write in writes])
    for write, error in zip(writes, errors):
        if error:
            write.error = write_error(error, write.file, write.at, len(write.data))


class QueueWriter:
    def __init__(self) -> None:
        self._helper: ThreadPoolExecutor | None = None  # started on the first big batch

    def run(self, queues: list[list[UnitWrite]], tails: TailWrites) -> None:
        """Do the writes of every queue (failures land in each UnitWrite's ``error`` and in
        ``tails.errors``), half of them on the helper thread when they are many; returns when
        all are done. A queue's writes (two when its units cross into a new file) stay in order
        on one thread: a crash between them must leave the queue's files holding a prefix of
        its units, since a start finds a queue's end by a binary search that a hole would
        fool."""
        if sum(map(len, queues)) + len(tails.fds) < PARALLEL_FROM:
            _run_all(queues)
            tails.errors = tails.pwrite(slice(None))
            return
        if self._helper is None:
            self._helper = ThreadPoolExecutor(1, thread_name_prefix="consumequeue-writer")
        half = len(tails.fds) // 2
        helped = self._helper.submit(_run_part, queues[1::2], tails, slice(half, None))
        try:
            _run_all(queues[::2])
            mine = tails.pwrite(slice(half))
        finally:
            theirs = helped.result()  # the buffers must outlive the helper's writes
        tails.errors = mine + theirs

    def close(self) -> None:
        if self._helper is not None:
            self._helper.shutdown(wait=True)
            self._helper = None
