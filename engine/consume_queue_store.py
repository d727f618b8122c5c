"""All ConsumeQueues, opened on first use so that idle partitions cost nothing at start.

It also keeps every partition's queue end as of its last drain (``ends``; the thorough flush
saves them in ``config/consumequeue_ends.json`` once the files are synced, before the
checkpoint moves). The files hold every unit below a saved end, so a start that finds less
knows that queue files were lost (deleted inside a partition's directory, or cut short), and
recovery rebuilds that partition from the CommitLog instead of giving its next batch an
offset that was already given.

Drains of many queues (the thorough round, close) go in batches through a QueueWriter, which
writes half of a batch's queues on a helper thread (see engine/queue_writer.py).
"""
from __future__ import annotations

import asyncio
import json
import logging
import math
import shutil
import time
from collections.abc import Callable, Iterator

from commitgate.engine import queue_core
from commitgate.engine.consume_queue import ConsumeQueue
from commitgate.engine.file_handle_cache import FileHandleCache
from commitgate.engine.paths import StorePaths
from commitgate.engine.queue_writer import QueueWriter, TailWrites, UnitWrite, write_error
from commitgate.engine.topic_table import atomic_write
from commitgate.native import c_helpers

tail_writes = c_helpers.pick("engine._queue_core", "tail_writes", queue_core.tail_writes)

Ends = dict[str, list[int]]  # topic -> each partition's queue end (0: none recorded)
# How long the thorough round writes queues before it lets the event loop run: in one go,
# 10,000 queues with units pending held the loop 43-48 ms every 10 s.
DRAIN_SLICE_S = 0.002
# Queues drained with one QueueWriter run: big enough to keep its two threads busy, small
# enough to stay well inside DRAIN_SLICE_S.
DRAIN_BATCH = 128

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
        self._writer = QueueWriter()
        # (topic, partition) -> the durable log start; set once recovery is done, so that a
        # queue whose files are all gone (rebuilt with every batch below it) still ends there
        self.log_start: Callable[[str, int], int] | None = None

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
        queue = self._queue_object(topic, partition)
        queue.load()
        if self.log_start is not None:
            queue.start_at(self.log_start(topic, partition))
        slots = self._queues.setdefault(topic, [])
        slots.extend([None] * (partition + 1 - len(slots)))
        slots[partition] = queue
        return queue

    def _queue_object(self, topic: str, partition: int) -> ConsumeQueue:
        return ConsumeQueue(topic, partition, self.paths.consumequeue_dir(topic, partition),
                            self.entries_per_file, self.handles)

    def loaded(self) -> Iterator[ConsumeQueue]:
        return iter([queue for slots in self._queues.values() for queue in slots
                     if queue is not None])

    def drain(self) -> bool:
        """Write every queue's pending units, note each queue's end, and give back the buffers
        of the queues with none (see ConsumeQueue); False (logged) if some units could not be
        written."""
        *_, drained = self._drain_slices(math.inf, DRAIN_BATCH)
        return drained

    async def drain_gradually(self, slice_s: float = DRAIN_SLICE_S,
                              batch: int = DRAIN_BATCH) -> bool:
        """``drain`` for the thorough flush round, letting the event loop run every
        ``slice_s`` (between batches of up to ``batch`` queues, cut short when their
        preparation reaches the slice's end: making 128 queues' first files took 33-51 ms).
        Units appended meanwhile may or may not be written: the round's checkpoint only counts
        what was dispatched before it began."""
        drained = True
        for drained in self._drain_slices(slice_s, batch):
            await asyncio.sleep(0)
        return drained

    def _drain_slices(self, slice_s: float, batch: int) -> Iterator[bool]:
        """Drain every loaded queue, batch by batch, also after a failure; at the end of each
        slice of ``slice_s`` and at the end, yield whether every unit so far was written."""
        queues = list(self.loaded())
        drained, at = True, 0
        deadline = time.monotonic() + slice_s
        while at < len(queues):
            taken, batch_drained = self._drain_batch(queues[at : at + batch], deadline)
            drained &= batch_drained
            at += taken
            if time.monotonic() >= deadline:
                yield drained
                # Skip the queues dropped or deleted while the event loop ran.
                queues, at = [queue for queue in queues[at:] if self._is_current(queue)], 0
                deadline = time.monotonic() + slice_s
        yield drained

    def _drain_batch(self, queues: list[ConsumeQueue], deadline: float = math.inf
                     ) -> tuple[int, bool]:
        """Drain the first queues of ``queues`` with one QueueWriter run: all of them, or those
        prepared by ``deadline`` (one at least). Most queues make one write to a file already
        open, which ``tail_writes`` prepares; the others (nothing pending, a new file, units
        crossing into the next file) go ConsumeQueue's way. Returns (how many, whether all were
        drained). Nothing else may run meanwhile."""
        drained = True
        prepared: list[tuple[ConsumeQueue, list[UnitWrite]]] = []
        tails, tail_queues = TailWrites(), []
        pinned, at = self.handles.pinned, 0
        try:
            while at < len(queues):
                first = at
                at = tail_writes(queues, at, self.handles.open_files, pinned, tails.fds,
                                 tails.buffers, tails.offsets, tails.files)
                tail_queues += queues[first:at]
                if at == len(queues):
                    break
                queue = queues[at]
                at += 1
                try:
                    writes = queue.pending_writes()
                except OSError as exc:  # a new file could not be made
                    drained = self._not_drained(queue, exc)
                    continue
                for write in writes:
                    pinned.add(write.file)
                prepared.append((queue, writes))
                if time.monotonic() >= deadline:
                    break
            self._writer.run([writes for _, writes in prepared], tails)
        finally:
            self.handles.unpin(tails.files)
            self.handles.unpin(write.file for _, writes in prepared for write in writes)
        for queue, writes in prepared:
            error = next((write.error for write in writes if write.error is not None), None)
            if error is not None:
                drained = self._not_drained(queue, error)
                continue
            if writes:
                queue.mark_written(writes)
            else:  # idle since the last round (see ConsumeQueue)
                queue.release_buffer()
            self._note_end(queue)
        for queue, mapped, offset, data, error in zip(tail_queues, tails.files, tails.offsets,
                                                      tails.buffers, tails.errors):
            if error:
                drained = self._not_drained(queue, write_error(error, mapped, offset, len(data)))
                continue
            queue.mark_written_to(mapped, offset + len(data))
            self._note_end(queue)
        return at, drained

    def _note_end(self, queue: ConsumeQueue) -> None:
        ends = self.ends.setdefault(queue.topic, [])
        ends.extend([0] * (queue.partition + 1 - len(ends)))
        ends[queue.partition] = queue.max_offset

    def _is_current(self, queue: ConsumeQueue) -> bool:
        slots = self._queues.get(queue.topic, ())
        return queue.partition < len(slots) and slots[queue.partition] is queue

    @staticmethod
    def _not_drained(queue: ConsumeQueue, exc: OSError) -> bool:
        log.error("%s: %d pending units not written: %s", queue, queue.pending_units, exc)
        return False

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
        self._queue_object(topic, partition).verify(self.recorded_end(topic, partition))

    def ends_table(self) -> Ends:
        """A copy of the ends noted by the last drains, to save once the files are synced."""
        return {topic: list(ends) for topic, ends in self.ends.items()}

    def save_ends(self, ends: Ends) -> None:
        """Write a table from ``ends_table`` (atomically; not at all when nothing changed)."""
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

    def close(self) -> bool:
        """Drain, sync and close every queue; False if some units could not be written."""
        drained = self.drain()
        self._writer.close()
        self.handles.close_all()
        self._queues.clear()
        return drained
