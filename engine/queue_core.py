"""QueueCore: the part of a ConsumeQueue that every append touches, in Python.

ConsumeQueue builds on engine._queue_core.QueueCore, the same in C (see engine/_queue_core.c
for why), and on this class where the C module was not built. Both must behave alike; the
tests run the two side by side.

The pending units are a bytearray whose first ``max_offset - pending_from`` units are the
ones not written to the queue's files yet. ``put`` adds a batch's units and leaves the file
work to two methods of the subclass: ``drain()`` (called when ``pending_limit`` bytes have
gathered, and before a batch that leaves a gap) and ``_start_pending(queue_offset)`` (called
when a pending run begins). The subclass sets every field in its ``__init__``.

``tail_writes`` prepares the writes of a drain of many queues (engine/queue_writer.py) in the
usual case, for ConsumeQueue subclasses: in C it takes a fraction of ConsumeQueue's own way.
"""
from __future__ import annotations

import struct

CQ_UNIT = struct.Struct(">qiq")  # phyOffset, size, tagsCode
UNIT_SIZE = CQ_UNIT.size
NO_TIMESTAMP = -1


class QueueCore:
    __slots__ = ("last_tags", "max_offset", "max_phy_end", "min_offset", "pending",
                 "pending_from", "pending_limit")

    def put(self, queue_offset: int, count: int, phy: int, size: int, timestamp: int) -> None:
        """Add ``count`` identical units for a batch at its base offset (to ``pending``)."""
        if count < 0:
            raise ValueError(f"no units for count {count}, size {size}")
        if queue_offset != self.max_offset:  # a replayed batch over a gap
            self.drain()
            self.pending_from = queue_offset
        at = (queue_offset - self.pending_from) * UNIT_SIZE
        if not at:
            self._start_pending(queue_offset)
        tags = self.last_tags
        if timestamp > tags:
            self.last_tags = tags = timestamp
        units = CQ_UNIT.pack(phy, size, tags) * count
        end = at + len(units)
        pending = self.pending
        if end <= len(pending):
            pending[at:end] = units  # same length: a copy, no realloc
        else:  # a new buffer, never a resize: a drain's view of the old one may outlive it
            self.pending = pending[:at] + units
        self.max_offset = queue_offset + count
        self.max_phy_end = phy + size
        if end >= self.pending_limit:
            self.drain()


def tail_writes(queues: list, start: int, open_files: dict, pinned: set, fds: list[int],
                buffers: list[memoryview], offsets: list[int], files: list) -> int:
    """From ``queues[start]`` on, each queue whose pending units all go into its file already
    open (``open_files[(queue._key, file index)]``, a ConsumeQueue's handle-cache key): its
    write (the file's descriptor, a view of the units, their offset in the file, the file)
    appended to the four lists, the file added to ``pinned``. Returns the index of the first
    queue that is not such a one (nothing pending, a file to open or make, units crossing into
    the next file): ConsumeQueue.pending_writes is for those."""
    if start < 0:
        raise ValueError("tail_writes: start must not be negative")
    at = start
    while at < len(queues):
        queue = queues[at]
        length = (queue.max_offset - queue.pending_from) * UNIT_SIZE
        pending = queue.pending
        if length <= 0 or type(pending) is not bytearray or length > len(pending):
            break
        file_bytes = queue.file_bytes
        if file_bytes <= 0:
            break
        index, offset = divmod(queue.pending_from * UNIT_SIZE, file_bytes)
        mapped = open_files.get((queue._key, index))
        if offset + length > file_bytes or mapped is None or mapped.fileno() < 0:
            break
        files.append(mapped)
        pinned.add(mapped)
        buffers.append(memoryview(pending)[:length])
        fds.append(mapped.fileno())
        offsets.append(offset)
        at += 1
    return at
