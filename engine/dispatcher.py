"""Dispatcher (RocketMQ's ReputMessageService): CommitLog entries become ConsumeQueue units.

One code path serves live appends (dispatched right after the append, on the event loop) and
start-up replay (whatever the ConsumeQueues lack is re-dispatched from the CommitLog). Replay is
idempotent: a unit already present is skipped. The IndexFile builder follows behind on its own.
An entry whose replay fails (one no live append would have kept: its dispatch failed and a
crash came before the undo) is logged and left out of its queue, so it cannot stop a start.
"""
from __future__ import annotations

import logging
from array import array
from collections.abc import Callable

from commitgate.engine.commit_log import RELOCATED, CommitLog, DispatchRequest
from commitgate.engine.consume_queue import ConsumeQueue
from commitgate.engine.consume_queue_store import ConsumeQueueStore

log = logging.getLogger(__name__)

Listener = Callable[[DispatchRequest], None]


class Dispatcher:
    def __init__(self, queues: ConsumeQueueStore) -> None:
        self.queues = queues
        # Every CommitLog entry below end_cell[0] is in its ConsumeQueue. A cell, not an int
        # attribute: the IndexBuilder's C walk reads it without the GIL.
        self.end_cell = array("q", [0])
        self.listeners: list[Listener] = []
        self.copies_placed = 0  # units of cleaner copies written by replay, not yet synced
        self.gapped: set[tuple[str, int]] = set()  # partitions replay left offsets without units

    @property
    def dispatched_offset(self) -> int:
        return self.end_cell[0]

    @dispatched_offset.setter
    def dispatched_offset(self, value: int) -> None:
        self.end_cell[0] = value

    def dispatch(self, req: DispatchRequest, queue: ConsumeQueue) -> None:
        """Write ``req``'s units into ``queue`` (its partition's, which the caller has at hand:
        a second lookup by (topic, partition) on every append is measurable)."""
        queue.put(req.queue_offset, req.offset_count, req.phy_offset, req.size, req.max_timestamp)
        self.end_cell[0] = req.phy_offset + req.size
        for listener in self.listeners:
            listener(req)

    def replay(self, commit_log: CommitLog, start: int, accept: Callable[[DispatchRequest], bool]
               ) -> int:
        """Re-dispatch entries from ``start`` that their queues lack; returns how many."""
        count = 0
        for req in commit_log.iter_entries(start, check_crc=False):
            if accept(req):
                count += self._replay_one(req)
        self.dispatched_offset = commit_log.max_offset
        return count

    def _replay_one(self, req: DispatchRequest) -> bool:
        """Replay one entry; False when nothing was written (present, or its replay failed)."""
        queue = self.queues.get(req.topic, req.partition)
        end = queue.max_offset
        try:
            if req.sys_flag & RELOCATED and req.queue_offset < end:
                return self._place_copy(req)
            if not self._lacks(req):
                return False
            self._note_gap(req, queue)
            self.dispatch(req, queue)
            return True
        except Exception:  # logged with its traceback; the start goes on
            log.exception("replay: %s-%d offset %d (CommitLog offset %d, %d offsets) could not "
                          "be dispatched; the batch is left out of its partition", req.topic,
                          req.partition, req.queue_offset, req.phy_offset, req.offset_count)
        self.gapped.add((req.topic, req.partition))  # later batches' units fill its offsets
        try:  # no partial units of it may stay
            if queue.max_offset > end:
                queue.truncate_offset(end)
        except Exception:  # the queue may be damaged: the start must go on
            log.exception("replay: %s-%d: dropping the partial units from offset %d failed",
                          req.topic, req.partition, end)
        return False

    def _lacks(self, req: DispatchRequest) -> bool:
        queue = self.queues.get(req.topic, req.partition)
        if req.queue_offset < queue.max_offset:
            return self._torn(queue, req)
        return True

    def _note_gap(self, req: DispatchRequest, queue: ConsumeQueue) -> None:
        """Offsets between the queue's end and a replayed batch get no units of their own
        (batches compaction removed whose entries are gone; in a rebuild, copies met later
        may still fill them): recovery points what is left at the next batch."""
        if req.queue_offset > queue.max_offset > queue.min_offset:
            self.gapped.add((req.topic, req.partition))

    def _place_copy(self, req: DispatchRequest) -> bool:
        """A copy the cleaner or the compactor made, below its queue's end. When the batch's
        units still point at the copy's source, a crash came between the copy and its
        repoint: the repoint is redone (the offsets compaction pointed at the source move
        too). Where the units are missing (a rebuild meets copies out of offset order,
        possibly below the queue's first offset, after their sources were deleted) the copy
        fills them. Units pointing anywhere else are a later state, left alone. Returns
        whether it wrote; the caller syncs the queue files before any segment can go
        (``copies_placed``)."""
        queue = self.queues.get(req.topic, req.partition)
        first = max(req.queue_offset, queue.min_offset)
        phy = size = 0
        if first < req.queue_offset + req.offset_count:
            phy, size, _ = queue.unit_or_hole(first)
        if size and req.source_phy and phy == req.source_phy:
            queue.repoint(req.queue_offset, req.offset_count, phy, req.phy_offset, req.size)
        elif not size:
            queue.write_units(req.queue_offset, req.offset_count, req.phy_offset, req.size,
                              req.max_timestamp)
        else:
            return False
        self.copies_placed += 1
        return True

    @staticmethod
    def _torn(queue: ConsumeQueue, req: DispatchRequest) -> bool:
        """A batch spanning two queue files whose second part a crash left unwritten: its
        units are written again whole (rewriting the identical first part is harmless)."""
        end = req.queue_offset + req.offset_count
        if end <= queue.max_offset or queue.get(req.queue_offset)[0] != req.phy_offset:
            return False
        log.warning("replay: %s-%d offsets %d..%d were cut short at %d; rewriting them",
                    req.topic, req.partition, req.queue_offset, end - 1, queue.max_offset)
        return True

