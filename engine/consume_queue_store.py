"""All ConsumeQueues, opened on first use so that idle partitions cost nothing at start.

It also keeps every partition's queue end as of the last thorough flush (``ends``, saved in
``config/consumequeue_ends.json`` before the checkpoint moves): the files hold every unit
below it, so a start that finds less knows that queue files were lost (deleted inside a
partition's directory, or cut short), and recovery rebuilds that partition from the
CommitLog instead of giving its next batch an offset that was already given.
"""
from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Iterator

from engine.consume_queue import ConsumeQueue
from engine.file_handle_cache import FileHandleCache
from engine.paths import StorePaths
from engine.topic_table import atomic_write

Ends = dict[str, list[int]]  # topic -> each partition's queue end (0: none recorded)

log = logging.getLogger(__name__)


class ConsumeQueueStore:
    def __init__(self, paths: StorePaths, entries_per_file: int, handles: FileHandleCache) -> None:
        self.paths = paths
        self.entries_per_file = entries_per_file
        self.handles = handles
        # Per topic, indexed by partition: with 10,000 partitions a (topic, partition)-keyed dict
        # cost every append a tuple, its hash and cache misses on the entry and its key.
        self._queues: dict[str, list[ConsumeQueue | None]] = {}
        self.ends: Ends = {}
        self._saved_ends: Ends = {}

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

    def load_ends(self) -> None:
        path = self.paths.consumequeue_ends
        try:
            data = json.loads(path.read_bytes())
            self.ends = {str(topic): [int(end) for end in ends] for topic, ends in data.items()}
        except FileNotFoundError:
            return
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            log.warning("%s is unreadable (%s): lost ConsumeQueue files go unnoticed at this "
                        "start", path, exc)
            return
        self._saved_ends = {topic: list(ends) for topic, ends in self.ends.items()}

    def recorded_end(self, topic: str, partition: int) -> int:
        ends = self.ends.get(topic, ())
        return ends[partition] if 0 <= partition < len(ends) else 0

    def verify(self, topic: str, partition: int) -> None:
        """``ConsumeQueue.verify`` against the recorded end, without loading the queue."""
        queue = ConsumeQueue(topic, partition, self.paths.consumequeue_dir(topic, partition),
                             self.entries_per_file, self.handles)
        queue.verify(self.recorded_end(topic, partition))

    def record_ends(self) -> Ends:
        """Every loaded queue's end, noted right after a drain; the whole table, to save once
        the files are synced."""
        for topic, slots in self._queues.items():
            ends = self.ends.setdefault(topic, [])
            ends.extend([0] * (len(slots) - len(ends)))
            for partition, queue in enumerate(slots):
                if queue is not None:
                    ends[partition] = queue.max_offset
        return {topic: list(ends) for topic, ends in self.ends.items()}

    def save_ends(self, ends: Ends) -> None:
        """Write a table from ``record_ends`` (atomically; not at all when nothing changed)."""
        if ends == self._saved_ends:
            return
        self.paths.consumequeue_ends.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.paths.consumequeue_ends, json.dumps(ends, separators=(",", ":")).encode())
        self._saved_ends = ends

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
        if 0 <= partition < len(self.ends.get(topic, ())):
            self.ends[topic][partition] = 0
        shutil.rmtree(self.paths.consumequeue_dir(topic, partition), ignore_errors=True)

    def delete_topic(self, topic: str) -> None:
        for queue in self._queues.pop(topic, []):
            if queue is not None:
                queue.destroy()
        self.ends.pop(topic, None)
        shutil.rmtree(self.paths.consumequeue_topic_dir(topic), ignore_errors=True)

    def close(self) -> None:
        self.drain()
        self.handles.close_all()
        self._queues.clear()
