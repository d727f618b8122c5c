"""All ConsumeQueues, opened on first use so that idle partitions cost nothing at start."""
from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator

from engine.consume_queue import ConsumeQueue
from engine.file_handle_cache import FileHandleCache
from engine.paths import StorePaths

log = logging.getLogger(__name__)


class ConsumeQueueStore:
    def __init__(self, paths: StorePaths, entries_per_file: int, handles: FileHandleCache) -> None:
        self.paths = paths
        self.entries_per_file = entries_per_file
        self.handles = handles
        # Per topic, indexed by partition: with 10,000 partitions a (topic, partition)-keyed dict
        # cost every append a tuple, its hash and cache misses on the entry and its key.
        self._queues: dict[str, list[ConsumeQueue | None]] = {}

    def get(self, topic: str, partition: int) -> ConsumeQueue:
        """The partition's queue, loaded from disk on first use."""
        slots = self._queues.get(topic)
        if slots is not None and 0 <= partition < len(slots):
            queue = slots[partition]
            if queue is not None:
                return queue
        return self._load(topic, partition)

    def _load(self, topic: str, partition: int) -> ConsumeQueue:
        if partition < 0:
            raise ValueError(f"{topic}: no partition {partition}")
        queue = ConsumeQueue(topic, partition, self.paths.consumequeue_dir(topic, partition),
                             self.entries_per_file, self.handles)
        queue.load()
        slots = self._queues.setdefault(topic, [])
        slots.extend([None] * (partition + 1 - len(slots)))
        slots[partition] = queue
        return queue

    def loaded(self) -> Iterator[ConsumeQueue]:
        return iter([queue for slots in self._queues.values() for queue in slots
                     if queue is not None])

    def drain(self) -> bool:
        """Write every queue's pending units, and give back the buffers of the queues with none
        (see ConsumeQueue); False (logged) if some units could not be written."""
        drained = True
        for queue in self.loaded():
            try:
                queue.drain(release_idle=True)
            except OSError as exc:
                log.error("%s: %d pending units not written: %s", queue, queue.pending_units, exc)
                drained = False
        return drained

    def exists_on_disk(self, topic: str, partition: int) -> bool:
        return self.paths.consumequeue_dir(topic, partition).is_dir()

    def create_dirs(self, topic: str, partitions: range) -> None:
        """A partition's directory marks it as known; its files come with its first data."""
        for partition in partitions:
            self.paths.consumequeue_dir(topic, partition).mkdir(parents=True, exist_ok=True)

    def drop(self, topic: str, partition: int) -> None:
        """Forget one partition's queue and delete its files (a rebuild starts from nothing)."""
        slots = self._queues.get(topic, [])
        queue = slots[partition] if 0 <= partition < len(slots) else None
        if queue is not None:
            slots[partition] = None
            queue.destroy()
        shutil.rmtree(self.paths.consumequeue_dir(topic, partition), ignore_errors=True)

    def delete_topic(self, topic: str) -> None:
        for queue in self._queues.pop(topic, []):
            if queue is not None:
                queue.destroy()
        shutil.rmtree(self.paths.consumequeue_topic_dir(topic), ignore_errors=True)

    def close(self) -> None:
        self.drain()
        self.handles.close_all()
        self._queues.clear()
