"""Start-up recovery: find the CommitLog's valid end, mend the ConsumeQueues, replay what they lack.

A clean stop (no ``abort`` marker) left everything flushed and the checkpoint exact, so the
scan starts at the end and finds nothing. After an unclean stop, entries are validated (magic,
size, position, CRC) from the checkpoint on; the first invalid one and everything after it is
cut off, ConsumeQueue units pointing past the cut are dropped, and the dispatcher replays what
the queues lack. A partition whose queue directory is missing or damaged, or whose files end
below the end recorded at the last thorough flush (files deleted or cut short), is rebuilt from
the whole CommitLog. Last, units a pointing left torn at a ConsumeQueue file boundary are
mended (``_mend_torn_pointings``).
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from commitgate.engine.checkpoint import StoreCheckpoint
from commitgate.engine.commit_log import COUNT_AND_BASE, CommitLog, DispatchRequest
from commitgate.engine.consume_queue import ConsumeQueue
from commitgate.engine.consume_queue_store import ConsumeQueueStore
from commitgate.engine.dispatcher import Dispatcher
from commitgate.engine.flush_consume_queue_service import syncfs
from commitgate.engine.mapped_file_queue import StoreDamaged
from commitgate.engine.topic_table import TopicTable

log = logging.getLogger(__name__)


@dataclass
class RecoveryReport:
    clean: bool
    commitlog_end: int = 0
    cut_at: int | None = None  # where an invalid or torn entry was cut off
    replayed_entries: int = 0
    rebuilt_partitions: list[tuple[str, int]] = field(default_factory=list)


def recover(commit_log: CommitLog, queues: ConsumeQueueStore, dispatcher: Dispatcher,
            table: TopicTable, checkpoint: StoreCheckpoint, *, clean: bool) -> RecoveryReport:
    report = RecoveryReport(clean=clean)
    value = checkpoint.value
    scan_from = value.commitlog_flushed
    if not clean:
        scan_from = min(scan_from, value.consumequeue_flushed)
    scan_from = min(max(scan_from, commit_log.min_offset), commit_log.max_offset)
    end = commit_log.valid_end(scan_from)
    report.commitlog_end = end
    if not clean and end < commit_log.max_offset:
        if not commit_log.unwritten_at(end):
            report.cut_at = end
            _warn_cut(commit_log, end)
        commit_log.truncate(end)
    commit_log.queue.set_write_end(end)
    rebuild = _damaged_partitions(queues, table, load_all=not clean)
    if not clean:
        for topic in table.topics.values():
            for partition in range(topic.partitions):
                if (topic.name, partition) not in rebuild:
                    queues.get(topic.name, partition).truncate_phy(end)
    normal_from = end if clean else max(min(value.consumequeue_flushed, end),
                                        commit_log.min_offset)
    replay_from = commit_log.min_offset if rebuild else normal_from
    if rebuild:
        log.warning("recovery: rebuilding ConsumeQueues of %s from the CommitLog", sorted(rebuild))
    report.rebuilt_partitions = sorted(rebuild)
    report.replayed_entries = dispatcher.replay(
        commit_log, replay_from, _acceptor(table, rebuild, normal_from))
    dispatcher.dispatched_offset = end
    for topic_name, partition in rebuild | dispatcher.gapped:
        filled = queues.get(topic_name, partition).fill_holes()
        if filled:
            log.warning("recovery: %s-%d: %d offsets without a batch of their own point at "
                        "the next batch", topic_name, partition, filled)
    dispatcher.gapped.clear()
    for topic_name, partition in rebuild:
        _cover_from_log_start(queues, table, topic_name, partition)
        # a rebuild may bring back records a compaction had removed: all of it is dirty again
        if table.topics[topic_name].cleaned_offsets.pop(partition, None) is not None:
            table.save()
    mended = 0 if clean else _mend_torn_pointings(commit_log, queues, table)
    if dispatcher.copies_placed or mended:
        # units pointing at copies (or mended): on disk before the cleaner may delete the
        # entries they no longer point at
        queues.drain()
        syncfs(queues.paths.consumequeue)
        dispatcher.copies_placed = 0
    return report


def _mend_torn_pointings(commit_log: CommitLog, queues: ConsumeQueueStore, table: TopicTable
                         ) -> int:
    """Mend the units a crash left torn at ConsumeQueue file boundaries; returns how many
    boundaries were mended.

    ``ConsumeQueue.point_at`` (the compactor's pointings, the cleaner's and replay's
    repoints) writes a range of units one file at a time, so a crash between two of those
    writes can leave the units of one batch, or of a run of removed offsets before the batch
    they point at, pointing at two entries. Replay cannot see it (a copy's first unit already
    points at the copy, and a dropped run leaves no copy at all), reads at the two sides
    disagree, and the cleaner, judging an entry by its batch's first unit, would delete an
    entry units still point at. A tear can only lie at a file boundary ``b``: there the unit
    of ``b - 1`` points at an entry whose batch reaches past ``b`` (the offsets up to the
    end of a batch point at it), so ``b`` must point at it too. The offsets from ``b`` to that
    batch's end are pointed at it, which completes the pointing (or undoes its part past
    ``b`` when the upper file reached the disk first): either way every entry pointed at is
    on disk, as nothing is deleted before the units moving away from it are synced."""
    mended = 0
    for topic in table.topics.values():
        for partition in range(topic.partitions):
            queue = queues.get(topic.name, partition)
            start = max(topic.log_start_offsets.get(partition, 0), queue.min_offset)
            for boundary in _file_boundaries(queue, start):
                if _mend_boundary(commit_log, queue, boundary):
                    log.warning("recovery: %s-%d: the units from offset %d on pointed at "
                                "another entry than those before it (a pointing cut short); "
                                "mended", topic.name, partition, boundary)
                    mended += 1
    return mended


def _file_boundaries(queue: ConsumeQueue, start: int) -> range:
    """The first offsets of the queue's files above ``start`` and below its end."""
    per_file = queue.entries_per_file
    first = (start // per_file + 1) * per_file
    return range(first, queue.max_offset, per_file)


def _mend_boundary(commit_log: CommitLog, queue: ConsumeQueue, boundary: int) -> bool:
    """Point the offsets from ``boundary`` to the end of the batch the unit just below points
    at, when they point elsewhere; True when it wrote."""
    phy, size, _ = queue.unit_or_hole(boundary - 1)
    entry = commit_log.entry(phy, size) if size else None
    if entry is None or len(entry) < COUNT_AND_BASE.size + 16:
        return False
    count, base = COUNT_AND_BASE.unpack_from(entry, 16)
    end = min(base + count, queue.max_offset)
    there = queue.unit_or_hole(boundary)
    if end <= boundary or not there[1] or there[:2] == (phy, size):
        return False  # a batch ends here, or the units agree (a hole is fill_holes' to mend)
    queue.point_at(boundary, end, phy, size)
    return True


def _cover_from_log_start(queues: ConsumeQueueStore, table: TopicTable, topic: str,
                          partition: int) -> None:
    """A rebuilt queue whose first batch begins above the log start (compaction removed the
    batches before it, and their entries are gone): those offsets point at that batch, as
    they did before, so the log start and the offsets stay where they were."""
    queue = queues.get(topic, partition)
    start = table.topics[topic].log_start_offsets.get(partition, 0)
    if queue.max_offset > queue.min_offset > start:
        queue.write_units(start, queue.min_offset - start, *queue.get(queue.min_offset))


def _warn_cut(commit_log: CommitLog, end: int) -> None:
    mapped = commit_log.queue.find(end)
    where = f"{mapped.path} position {end - mapped.start_offset}" if mapped else "past the files"
    log.warning("recovery: the CommitLog entry at offset %d (%s) is invalid or torn; cutting the "
                "tail there", end, where)


def _damaged_partitions(queues: ConsumeQueueStore, table: TopicTable, *, load_all: bool
                        ) -> set[tuple[str, int]]:
    """Partitions whose queue directory is gone, whose files lack units below the recorded
    end, or (when loading) whose files are damaged."""
    damaged = set()
    for topic in table.topics.values():
        for partition in range(topic.partitions):
            if not queues.exists_on_disk(topic.name, partition):
                damaged.add((topic.name, partition))
                continue
            problem = _queue_problem(queues, topic.name, partition, load_all)
            if problem:
                log.warning("recovery: ConsumeQueue %s-%d %s", topic.name, partition, problem)
                damaged.add((topic.name, partition))
    for topic_name, partition in damaged:
        queues.drop(topic_name, partition)
        queues.create_dirs(topic_name, range(partition, partition + 1))
    return damaged


def _queue_problem(queues: ConsumeQueueStore, topic: str, partition: int, load: bool) -> str:
    """What is wrong with a partition's queue files ('' when nothing): loaded when ``load``,
    else only checked (see ConsumeQueue.verify)."""
    end = queues.recorded_end(topic, partition)
    try:
        if not load:
            queues.verify(topic, partition)
        elif queues.get(topic, partition).max_offset < end:
            return f"ends below its recorded end {end}: files were lost"
    except (StoreDamaged, OSError) as exc:
        return f"is damaged ({exc})"
    return ""


def _acceptor(table: TopicTable, rebuild: set[tuple[str, int]], normal_from: int
              ) -> Callable[[DispatchRequest], bool]:
    def accept(req: DispatchRequest) -> bool:
        topic = table.get(req.topic)
        if topic is None or not 0 <= req.partition < topic.partitions \
                or req.phy_offset < topic.created_phy:
            return False
        if (req.topic, req.partition) in rebuild:
            # Only batches above the log start: they cover it without a gap, copies and
            # originals alike, while dead ones may lie anywhere below it.
            return req.queue_offset + req.offset_count > \
                topic.log_start_offsets.get(req.partition, 0)
        return req.phy_offset >= normal_from
    return accept
