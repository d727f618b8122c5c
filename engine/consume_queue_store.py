"""All ConsumeQueues, opened on first use so that idle partitions cost nothing at start."""
from __future__ import annotations

import shutil
from collections.abc import Iterator

from engine.consume_queue import ConsumeQueue
from engine.file_handle_cache import FileHandleCache
from engine.paths import StorePaths


class ConsumeQueueStore:
    def __init__(self, paths: StorePaths, entries_per_file: int, handles: FileHandleCache) -> None:
        self.paths = paths
        self.entries_per_file = entries_per_file
        self.handles = handles
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}

    def get(self, topic: str, partition: int) -> ConsumeQueue:
        """The partition's queue, loaded from disk on first use."""
        key = (topic, partition)
        queue = self._queues.get(key)
        if queue is None:
            queue = ConsumeQueue(topic, partition, self.paths.consumequeue_dir(topic, partition),
                                 self.entries_per_file, self.handles)
            queue.load()
            self._queues[key] = queue
        return queue

    def loaded(self) -> Iterator[ConsumeQueue]:
        return iter(list(self._queues.values()))

    def exists_on_disk(self, topic: str, partition: int) -> bool:
        return self.paths.consumequeue_dir(topic, partition).is_dir()

    def create_dirs(self, topic: str, partitions: range) -> None:
        """A partition's directory marks it as known; its files come with its first data."""
        for partition in partitions:
            self.paths.consumequeue_dir(topic, partition).mkdir(parents=True, exist_ok=True)

    def drop(self, topic: str, partition: int) -> None:
        """Forget one partition's queue and delete its files (a rebuild starts from nothing)."""
        queue = self._queues.pop((topic, partition), None)
        if queue is not None:
            queue.destroy()
        shutil.rmtree(self.paths.consumequeue_dir(topic, partition), ignore_errors=True)

    def delete_topic(self, topic: str) -> None:
        for key in [k for k in self._queues if k[0] == topic]:
            self._queues.pop(key).destroy()
        shutil.rmtree(self.paths.consumequeue_topic_dir(topic), ignore_errors=True)

    def close(self) -> None:
        self.handles.close_all()
        self._queues.clear()
