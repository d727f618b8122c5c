"""Dispatcher (RocketMQ's ReputMessageService): CommitLog entries become ConsumeQueue units.

One code path serves live appends (dispatched right after the append, on the event loop) and
start-up replay (whatever the ConsumeQueues lack is re-dispatched from the CommitLog). Replay is
idempotent: a unit already present is skipped. The IndexFile builder follows behind on its own.
"""
from __future__ import annotations

import logging
from array import array
from collections.abc import Callable

from engine.commit_log import RELOCATED, CommitLog, DispatchRequest
from engine.consume_queue import ConsumeQueue
from engine.consume_queue_store import ConsumeQueueStore

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
            if not accept(req):
                continue
            if req.sys_flag & RELOCATED and req.queue_offset < \
                    self.queues.get(req.topic, req.partition).max_offset:
                count += self._place_copy(req, commit_log)
            elif self._lacks(req):
                queue = self.queues.get(req.topic, req.partition)
                self.dispatch(_over_gap(req, queue), queue)
                count += 1
        self.dispatched_offset = commit_log.max_offset
        return count

    def _lacks(self, req: DispatchRequest) -> bool:
        queue = self.queues.get(req.topic, req.partition)
        if req.queue_offset < queue.max_offset:
            return self._torn(queue, req)
        return True

    def _place_copy(self, req: DispatchRequest, commit_log: CommitLog) -> bool:
        """A copy the CommitLog cleaner or the compactor made, below its queue's end: its
        units are written unless they point at it or at a later entry that still exists (the
        later of two copies is the newer state; a crash may have come before the copy's units
        were written). A rebuild meets copies out of offset order, possibly below the queue's
        first offset. Returns whether it wrote; the caller syncs the queue files before any
        segment can go (``copies_placed``)."""
        queue = self.queues.get(req.topic, req.partition)
        first = max(req.queue_offset, queue.min_offset)
        if first < req.queue_offset + req.offset_count:
            phy, size, _ = queue.unit_or_hole(first)
            if size and phy >= req.phy_offset and commit_log.entry(phy, size) is not None:
                return False
        queue.write_units(req.queue_offset, req.offset_count, req.phy_offset, req.size,
                          req.max_timestamp)
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


def _over_gap(req: DispatchRequest, queue: ConsumeQueue) -> DispatchRequest:
    """``req`` as dispatched after the queue's end: when offsets lie between (batches that
    compaction removed and whose entries are gone, or lost ones), their units point at this
    batch too, as a fetch of a removed offset returns the next batch."""
    gap = req.queue_offset - queue.max_offset
    if gap <= 0 or queue.max_offset <= queue.min_offset:
        return req
    log.warning("replay: %s-%d offsets %d..%d have no batch; they point at the batch at %d "
                "(phy %d)", req.topic, req.partition, queue.max_offset, req.queue_offset - 1,
                req.queue_offset, req.phy_offset)
    return DispatchRequest(req.topic, req.partition, queue.max_offset, req.offset_count + gap,
                           req.phy_offset, req.size, req.max_timestamp, req.store_timestamp,
                           req.sys_flag)
