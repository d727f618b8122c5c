"""Start-up recovery: find the CommitLog's valid end, mend the ConsumeQueues, replay what they lack.

A clean stop (no ``abort`` marker) left everything flushed and the checkpoint exact, so the
scan starts at the end and finds nothing. After an unclean stop, entries are validated (magic,
size, position, CRC) from the checkpoint on; the first invalid one and everything after it is
cut off, ConsumeQueue units pointing past the cut are dropped, and the dispatcher replays what
the queues lack. A partition whose queue directory is missing or damaged, or whose files end
below the end recorded at the last thorough flush (files deleted or cut short), is rebuilt from
the whole CommitLog.
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from commitgate.engine.checkpoint import StoreCheckpoint
from commitgate.engine.commit_log import CommitLog, DispatchRequest
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
    if dispatcher.copies_placed:
        # units pointing at copies: on disk before the cleaner may delete the originals
        queues.drain()
        syncfs(queues.paths.consumequeue)
        dispatcher.copies_placed = 0
    return report


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
