"""A bounded LRU of open ConsumeQueue files, so 10,000 idle partitions hold no descriptors.

Each open file costs one descriptor (appends use pwrite, reads pread: never a mapping, which
would hold a second). ``capacity`` is the whole descriptor budget, retired files included, so
the cache stays under RLIMIT_NOFILE. A file evicted with unflushed bytes is handed to the
ConsumeQueue flush service (``retired``), which syncs and closes it off the event loop; when
evictions outrun that service and the retired share of the budget is full, the evicted file
is synced and closed at once instead.
Files a QueueWriter run is writing are pinned: evicted meanwhile, they are retired too, never
closed under the writing threads.
Which files are dirty is read from their own written and flushed positions when the flush
service asks, once a round, not recorded by every append: with 10,000 partitions, adding the
file to a set on every append cost a cache miss each time.
"""
from __future__ import annotations

import logging
import resource
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable

from commitgate.engine.mapped_file import MappedFile

log = logging.getLogger(__name__)

RESERVED_DESCRIPTORS = 2048  # sockets, CommitLog segments, index files, logs


def default_capacity() -> int:
    """Raise the soft descriptor limit to the hard one and leave room for everything else."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    limit = 65536 if soft == resource.RLIM_INFINITY else soft
    return max(64, min(limit - RESERVED_DESCRIPTORS, 30_000))


class FileHandleCache:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.retired_limit = max(1, capacity // 16)
        self.open_limit = max(1, capacity - self.retired_limit)
        # Keyed by (queue directory, file index): cheaper to hash on every append than a Path.
        self._open: OrderedDict[Hashable, MappedFile] = OrderedDict()
        self.flushing: set[MappedFile] = set()  # being synced on a worker thread: do not close
        self.pinned: set[MappedFile] = set()  # written by a QueueWriter run: do not close
        self.retired: list[MappedFile] = []

    def get(self, key: Hashable, opener: Callable[[], MappedFile]) -> MappedFile:
        mapped = self._open.get(key)
        if mapped is not None:
            self._open.move_to_end(key)
            return mapped
        mapped = opener()
        self._open[key] = mapped
        while len(self._open) > self.open_limit:
            self._evict(self._open.popitem(last=False)[1])
        return mapped

    @property
    def open_files(self) -> dict[Hashable, MappedFile]:
        """The open files by key, least recently used first; to read, never to change."""
        return self._open

    @property
    def dirty(self) -> list[MappedFile]:
        """Open files with bytes written since their last sync."""
        return [mapped for mapped in self._open.values() if _unflushed(mapped)]

    def unpin(self, files: Iterable[MappedFile]) -> None:
        """Files a QueueWriter run is done with; one evicted meanwhile waits in ``retired``."""
        self.pinned.difference_update(files)

    def forget(self, key: Hashable) -> MappedFile | None:
        """Drop a file that is being deleted; the caller destroys it."""
        return self._open.pop(key, None)

    def take_flush_work(self, least_bytes: int = 0) -> tuple[list[MappedFile], list[MappedFile]]:
        """(files to sync, the retired ones among them to close after), pinned until finished.
        Dirty files with fewer than ``least_bytes`` unflushed stay dirty for a later round, unless
        full: nothing more will dirty them (RocketMQ's isAbleToFlush)."""
        retired, self.retired = self.retired, []
        due = {mapped for mapped in self.dirty
               if mapped.wrote_position - mapped.flushed_position >= least_bytes
               or mapped.wrote_position == mapped.size}
        self.flushing = due | set(retired)
        return list(self.flushing), retired

    def finish_flush(self, retired: list[MappedFile]) -> None:
        self.flushing = set()
        for mapped in retired:
            mapped.close()

    def close_all(self) -> None:
        for mapped in list(self._open.values()) + self.retired:
            mapped.flush()
            mapped.close()
        self._open.clear()
        self.retired = []

    def _evict(self, mapped: MappedFile) -> None:
        if mapped in self.flushing or mapped in self.pinned:  # in use: it closes after
            self.retired.append(mapped)
        elif not _unflushed(mapped):
            mapped.close()
        elif len(self.retired) < self.retired_limit:
            self.retired.append(mapped)
        else:
            log.debug("%s: retired ConsumeQueue files at their limit %d; syncing inline",
                      mapped.path, self.retired_limit)
            mapped.flush()
            mapped.close()


def _unflushed(mapped: MappedFile) -> bool:
    return mapped.wrote_position > mapped.flushed_position
