"""MessageStore: the only face of the store that the gateway sees.

It owns the CommitLog, the ConsumeQueues, the IndexFiles, the flush services and the topic
table; every state change happens on the event loop that opened it. Expected outcomes come
back as ``StoreStatus`` values; exceptions mean a bug or a damaged store.
"""
from __future__ import annotations

import errno
import fcntl
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterator

from engine.allocate_mapped_file_service import AllocateMappedFileService
from engine.body_format import BodyFormat
from engine.checkpoint import StoreCheckpoint
from engine.commit_log import (
    COUNT_AND_BASE,
    PREFIX_SIZE,
    CommitLog,
    DispatchRequest,
    body_of,
    topic_trailer,
)
from engine.config import FlushDiskType, StoreConfig
from engine.consume_queue import ConsumeQueue, UnitReader
from engine.consume_queue_store import ConsumeQueueStore
from engine.dispatcher import Dispatcher
from engine.file_handle_cache import FileHandleCache, default_capacity
from engine.flush_commit_log_service import FlushCommitLogService
from engine.flush_consume_queue_service import FlushConsumeQueueService
from engine.group_commit_service import GroupCommitService
from engine.index_builder import IndexBuilder
from engine.log_compactor import cleanup_policy
from engine.mapped_file_queue import MappedFileQueue
from engine.paths import StorePaths
from engine.recovery import RecoveryReport, recover
from engine.retention_service import RetentionService
from engine.segment_ledger import StartMove
from engine.status import AppendResult, ReadResult, StoreStatus, TopicResult
from engine.topic_table import TopicRecord, TopicTable, topic_name_error

log = logging.getLogger(__name__)

TIMESTAMP_TYPE, LOG_APPEND_TIME = "message.timestamp.type", "LogAppendTime"


# A data directory's filesystem must hold this many CommitLog segments: the one written, the
# pre-allocated next one, the cleaner's reserve and one of data.
MIN_SEGMENTS_ON_VOLUME = 4


class StoreLocked(Exception):
    """Another process has the data directory open."""


class VolumeTooSmall(Exception):
    """The data directory's filesystem cannot hold the store's segments."""


class MessageStore:
    def __init__(self, config: StoreConfig, body_format: BodyFormat, *, store_host: int = 0) -> None:
        self.config = config
        self.body_format = body_format
        self.paths = StorePaths(config.data_dir)
        self.store_host = store_host
        self.table = TopicTable(self.paths.topics_file)
        self._allocator = AllocateMappedFileService(warm_up=config.warm_mapped_file)
        self.commit_log = CommitLog(self._commitlog_queue(), body_format)
        capacity = config.max_open_consumequeue_files or default_capacity()
        self.handles = FileHandleCache(capacity)
        self.queues = ConsumeQueueStore(self.paths, config.consumequeue_entries_per_file,
                                        self.handles)
        self.dispatcher = Dispatcher(self.queues)
        self.checkpoint: StoreCheckpoint | None = None
        self.flush_service: GroupCommitService | FlushCommitLogService | None = None
        self.consumequeue_flush_service: FlushConsumeQueueService | None = None
        self.index: IndexBuilder | None = None
        self.retention: RetentionService | None = None
        self._trailers: dict[str, bytes] = {}
        self._lock_fd = -1
        self._logged_spell = 0  # the CommitLog's last refusal spell that was logged
        # Awaited before the cleaner deletes a segment; False stops the deletion. State kept
        # beside the store that is rebuilt from the CommitLog (idempotent producers) is
        # saved there: what it would replay may be in that segment alone.
        self.before_segment_delete: list[Callable[[], Awaitable[bool]]] = []
        self.open_ = False

    # ---- life cycle -------------------------------------------------------------------------

    async def open(self) -> RecoveryReport:
        """Lock the directory, load and recover the files, start the background services."""
        self.paths.root.mkdir(parents=True, exist_ok=True)
        self._check_volume()
        self._lock_directory()
        self.table.load()
        self.checkpoint = StoreCheckpoint(self.paths.checkpoint)
        clean = not self.paths.abort.exists()
        self.commit_log.queue.load()
        self.queues.load_ends()
        report = recover(self.commit_log, self.queues, self.dispatcher, self.table,
                         self.checkpoint, clean=clean)
        self.queues.log_start = self._logical_start
        for queue in self.queues.loaded():
            queue.start_at(self._logical_start(queue.topic, queue.partition))
        self.paths.abort.touch()
        self._start_services()
        self.open_ = True
        log.info("store open at %s: %d topics, CommitLog [%d, %d), %s start%s",
                 self.paths.root, len(self.table.topics), self.commit_log.min_offset,
                 self.commit_log.max_offset, "clean" if clean else "unclean",
                 f", cut a torn tail at {report.cut_at}" if report.cut_at is not None else "")
        return report

    async def close(self) -> None:
        """Flush everything, save the checkpoint, remove the abort marker."""
        if not self.open_:
            return
        self.open_ = False
        await self.retention.stop()
        await self.flush_service.stop()
        self.index.stop()
        await self.consumequeue_flush_service.stop()
        # Writes what the final flush could not, then syncs and closes the queue files, which
        # the ends and the checkpoint below count on.
        drained = self.queues.close()
        value = self.checkpoint.value
        value.commitlog_flushed = self.commit_log.flush()
        if drained:
            self.queues.save_ends(self.queues.ends_table())
            value.consumequeue_flushed = self.dispatcher.dispatched_offset
        self.checkpoint.save()
        self.commit_log.queue.close()
        self._allocator.shutdown()
        if drained:
            self.paths.abort.unlink(missing_ok=True)
        else:  # the abort marker stays: the next start re-dispatches the missing units
            log.error("store closed with ConsumeQueue units unwritten; the next start "
                      "rebuilds them from the CommitLog")
        os.close(self._lock_fd)
        log.info("store closed at %s, CommitLog end %d", self.paths.root, value.commitlog_flushed)

    def _commitlog_queue(self) -> MappedFileQueue:
        size = self.config.commitlog_segment_bytes
        return MappedFileQueue(self.paths.commitlog, size,
                               lambda path, start, nxt: self._allocator.get(path, start, size, nxt))

    def _check_volume(self) -> None:
        stat = os.statvfs(self.paths.root)
        size, segment = stat.f_blocks * stat.f_frsize, self.config.commitlog_segment_bytes
        if size < MIN_SEGMENTS_ON_VOLUME * segment:
            raise VolumeTooSmall(
                f"{self.paths.root} is on a filesystem of {size} bytes, which cannot hold "
                f"{MIN_SEGMENTS_ON_VOLUME} CommitLog segments of {segment} bytes (the one "
                f"written, the next one, the cleaner's reserve, data): set "
                f"commitlog.segment.bytes to {size // MIN_SEGMENTS_ON_VOLUME} or less")

    def _lock_directory(self) -> None:
        self._lock_fd = os.open(self.paths.lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            raise StoreLocked(f"{self.paths.root} is in use by another process") from None

    def _start_services(self) -> None:
        cfg = self.config
        if cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH:
            self.flush_service = GroupCommitService(self.commit_log, self.checkpoint,
                                                    cfg.sync_flush_timeout_ms)
        else:
            self.flush_service = FlushCommitLogService(self.commit_log, self.checkpoint, cfg)
        self.flush_service.start()
        self.consumequeue_flush_service = FlushConsumeQueueService(
            self.handles, self.checkpoint, lambda: self.dispatcher.dispatched_offset,
            self.queues, cfg)
        self.consumequeue_flush_service.start()
        self.index = IndexBuilder(self.paths.index, self.commit_log, self.body_format,
                                  self.checkpoint, cfg, self.dispatcher.end_cell)
        self.index.start()
        self.retention = RetentionService(self, cfg)
        self.retention.start()

    # ---- topics -------------------------------------------------------------------------------

    def topic(self, name: str) -> TopicRecord | None:
        return self.table.get(name)

    def topics(self) -> list[TopicRecord]:
        return list(self.table.topics.values())

    def create_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None,
                     *, validate_only: bool = False) -> TopicResult:
        error = topic_name_error(name)
        if error:
            return TopicResult(StoreStatus.INVALID_TOPIC, error)
        if name in self.table.topics:
            return TopicResult(StoreStatus.TOPIC_ALREADY_EXISTS, f"topic '{name}' already exists")
        if partitions < 1:
            return TopicResult(StoreStatus.INVALID_PARTITIONS,
                               f"topic '{name}': partitions must be at least 1, got {partitions}")
        if validate_only:
            return TopicResult(StoreStatus.OK)
        record = TopicRecord(name, partitions, configs=dict(configs or {}),
                             created_phy=self.commit_log.max_offset)
        self.queues.create_dirs(name, range(partitions))
        self.table.topics[name] = record
        self.table.save()
        log.info("created topic %s with %d partitions (id %s)", name, partitions, record.topic_id)
        return TopicResult(StoreStatus.OK)

    def delete_topic(self, name: str) -> TopicResult:
        if self.table.topics.pop(name, None) is None:
            return TopicResult(StoreStatus.UNKNOWN_TOPIC_OR_PARTITION, f"no topic '{name}'")
        self.table.save()
        self.queues.delete_topic(name)
        self._trailers.pop(name, None)
        self.commit_log.ledger.invalidate()  # its entries died: the next pass walks again
        log.info("deleted topic %s", name)
        if self.commit_log.refusing:  # its space may end the refusal: clean now
            self.retention.wake()
        return TopicResult(StoreStatus.OK)

    def create_partitions(self, name: str, total: int, *, validate_only: bool = False
                          ) -> TopicResult:
        record = self.table.get(name)
        if record is None:
            return TopicResult(StoreStatus.UNKNOWN_TOPIC_OR_PARTITION, f"no topic '{name}'")
        if total <= record.partitions:
            return TopicResult(StoreStatus.INVALID_PARTITIONS,
                               f"topic '{name}' has {record.partitions} partitions; "
                               f"the new count {total} must be larger")
        if not validate_only:
            self.queues.create_dirs(name, range(record.partitions, total))
            record.partitions = total
            self.table.save()
        return TopicResult(StoreStatus.OK)

    def compacted(self, name: str) -> bool:
        """Whether the topic's cleanup.policy includes compact (its records need keys)."""
        record = self.table.get(name)
        return record is not None and "compact" in cleanup_policy(record, self.config)

    def alter_topic_configs(self, name: str, changes: dict[str, str | None]) -> TopicResult:
        """Set (value) or remove (None) topic configs; the store reads retention and timestamps."""
        record = self.table.get(name)
        if record is None:
            return TopicResult(StoreStatus.UNKNOWN_TOPIC_OR_PARTITION, f"no topic '{name}'")
        for key, value in changes.items():
            if value is None:
                record.configs.pop(key, None)
            else:
                record.configs[key] = value
        self.table.save()
        return TopicResult(StoreStatus.OK)

    # ---- data -----------------------------------------------------------------------------------

    def append(self, topic: str, partition: int, body: memoryview, *, offset_count: int,
               max_timestamp: int, sys_flag: int = 0, born_host: int = 0) -> AppendResult:
        """Store one batch (a writable buffer; the base offset is written into it in place)."""
        record = self.table.topics.get(topic)  # one lookup: this runs for every produced batch
        if record is None or not 0 <= partition < record.partitions:
            return AppendResult(StoreStatus.UNKNOWN_TOPIC_OR_PARTITION)
        if not self.open_:
            return AppendResult(StoreStatus.STORE_CLOSED)
        queue = self.queues.get(topic, partition)
        trailer = self._trailers.get(topic) or self._trailers.setdefault(topic, topic_trailer(topic))
        if PREFIX_SIZE + len(body) + len(trailer) > self.commit_log.max_entry_size:
            return AppendResult(StoreStatus.ENTRY_TOO_LARGE,
                                error=f"{topic}-{partition}: batch of {len(body)} bytes does not "
                                      f"fit in a CommitLog segment")
        now = int(time.time() * 1000)
        append_time = now if record.configs.get(TIMESTAMP_TYPE) == LOG_APPEND_TIME else None
        base = queue.max_offset
        self.body_format.assign(body, base, append_time)
        req = DispatchRequest(topic, partition, base, offset_count, 0, 0,
                              max_timestamp if append_time is None else append_time, now, sys_flag)
        try:
            self.commit_log.append(req, body, trailer, born_host, self.store_host)
        except OSError as exc:
            self._append_failed(topic, partition, base, exc)
            return AppendResult(StoreStatus.DISK_ERROR, error=str(exc))
        try:
            self.dispatcher.dispatch(req, queue)
        except OSError as exc:
            log.error("ConsumeQueue %s-%d at offset %d failed: %s", topic, partition, base, exc)
            self._undo_append(queue, req)
            return AppendResult(StoreStatus.DISK_ERROR, error=str(exc))
        return AppendResult(StoreStatus.OK, base, append_time or -1, req.phy_offset,
                            req.phy_offset + req.size)

    def _append_failed(self, topic: str, partition: int, offset: int, exc: OSError) -> None:
        """Log a failed append; a refusal for space wakes the cleaner and is logged once a
        spell (a producer retrying would fill the log with it)."""
        commit_log = self.commit_log
        if exc.errno != errno.ENOSPC or not commit_log.refusing:
            log.error("append to %s-%d at offset %d failed: %s", topic, partition, offset, exc)
            return
        if self._logged_spell != commit_log.refusal_spells:
            self._logged_spell = commit_log.refusal_spells
            log.error("disk full: refusing writes (first %s-%d at offset %d) until retention, "
                      "a deleted topic or the CommitLog cleaner frees space; reads go on: %s",
                      topic, partition, offset, exc)
            self.retention.wake()  # once a spell: the cleaner then retries every second

    def _undo_append(self, queue: ConsumeQueue, req: DispatchRequest) -> None:
        """A failed append leaves no trace: neither the units a partial dispatch wrote nor the
        CommitLog entry may come back at the next start (the client was told it failed)."""
        try:
            queue.truncate_offset(req.queue_offset)
            self.commit_log.rollback(req.phy_offset)
        except OSError as exc:
            log.error("undoing the failed append to %s-%d at offset %d failed too: %s",
                      req.topic, req.partition, req.queue_offset, exc)

    async def wait_durable(self, phy_end: int) -> StoreStatus:
        """Under SYNC_FLUSH, wait until the CommitLog is on disk up to ``phy_end``."""
        return await self.flush_service.wait_durable(phy_end)

    def read(self, topic: str, partition: int, offset: int, max_bytes: int, *,
             min_one: bool = True) -> ReadResult:
        """Batches from the one holding ``offset`` on, up to ``max_bytes`` (at least one batch
        when ``min_one``), as zero-copy slices of the CommitLog."""
        queue, status = self._queue(topic, partition)
        if queue is None:
            return ReadResult(status)
        start, end = self._log_start(queue), queue.max_offset
        result = ReadResult(StoreStatus.OK, [], offset, start, end)
        if not start <= offset <= end:
            result.status = StoreStatus.OFFSET_OUT_OF_RANGE
            return result
        total = 0
        buffers = result.buffers
        for entry, after in self._entries(queue, offset):
            body = body_of(entry)
            if total + len(body) > max_bytes and (buffers or not min_one):
                break
            buffers.append(body)
            total += len(body)
            offset = after
        result.next_offset = offset
        return result

    def log_start_offset(self, topic: str, partition: int) -> int:
        queue, _ = self._queue(topic, partition)
        return -1 if queue is None else self._log_start(queue)

    def log_end_offset(self, topic: str, partition: int) -> int:
        queue, _ = self._queue(topic, partition)
        return -1 if queue is None else queue.max_offset

    def partition_size(self, topic: str, partition: int) -> int:
        """Bytes of the CommitLog entries holding the partition's batches from its log start
        on (DescribeLogDirs), or -1 for an unknown partition. One step per batch."""
        queue, _ = self._queue(topic, partition)
        if queue is None:
            return -1
        return sum(len(entry) for entry, _ in self._entries(queue, self._log_start(queue)))

    def offset_for_timestamp(self, topic: str, partition: int, timestamp: int
                             ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``timestamp``, or None."""
        queue, _ = self._queue(topic, partition)
        if queue is None:
            return None
        first = queue.search_offset(lambda unit: unit[2] >= timestamp, self._log_start(queue))
        if first >= queue.max_offset:
            return None
        found = self.body_format.offset_for_timestamp(self._body_at(queue, first), timestamp)
        return None if found is None else (max(found[0], self._log_start(queue)), found[1])

    def max_timestamp_offset(self, topic: str, partition: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp, or None when empty."""
        queue, _ = self._queue(topic, partition)
        if queue is None or queue.max_offset <= self._log_start(queue):
            return None
        first = queue.search_offset(lambda unit: unit[2] >= queue.last_tags,
                                    self._log_start(queue))
        return self.body_format.max_timestamp_offset(self._body_at(queue, first))

    def delete_records(self, topic: str, partition: int, before: int) -> tuple[StoreStatus, int]:
        """Advance the log start offset to ``before`` (-1: the end); returns the new one."""
        queue, status = self._queue(topic, partition)
        if queue is None:
            return status, -1
        target = queue.max_offset if before == -1 else before
        if not 0 <= target <= queue.max_offset:
            return StoreStatus.OFFSET_OUT_OF_RANGE, self._log_start(queue)
        self.advance_log_start(topic, partition, target)
        self.table.save()
        if self.commit_log.refusing:
            self.retention.wake()
        return StoreStatus.OK, self._log_start(queue)

    def advance_log_start(self, topic: str, partition: int, offset: int) -> None:
        """Move the logical log start forward (never back); the caller saves the table. The
        CommitLog cleaner counts what died and deletes the queue files wholly below later,
        a slice at a time (a big move would hold the loop)."""
        record = self.table.topics[topic]
        starts = record.log_start_offsets
        if offset > starts.get(partition, 0):
            old = self.log_start_offset(topic, partition)
            starts[partition] = offset
            self.commit_log.ledger.moves.append(StartMove(topic, partition, old, offset, record))

    async def lookup_key(self, topic: str, key: bytes, begin_ms: int = 0, end_ms: int = 2**62,
                         max_count: int = 64) -> list[tuple[int, int]]:
        """(partition, base offset) of batches holding a record with ``key``, newest first.
        Waits (boundedly) for the IndexFile builder to reach what was appended before the call."""
        await self.index.catch_up(self.dispatcher.dispatched_offset)
        hits: list[tuple[int, int]] = []
        for phy in self.index.query(topic.encode() + b"#" + key, begin_ms, end_ms, max_count):
            req, _size = self.commit_log.decode(phy, check_crc=False)
            if req is None or req.topic != topic or req.queue_offset < \
                    self.log_start_offset(topic, req.partition):
                continue
            body = self.commit_log.body(phy, req.size)
            found = (req.partition, req.queue_offset)
            # a batch the cleaner relocated is indexed twice until its old segment goes
            if key in self.body_format.keys(body) and found not in hits:
                hits.append(found)
        return hits

    def iter_batches(self, from_phy: int
                     ) -> Iterator[tuple[str, int, int, memoryview, int]] | None:
        """Stored batches of existing topics from CommitLog offset ``from_phy`` on (or from the
        oldest segment kept), as (topic, partition, base offset, body, entry end): what state
        kept beside the store (idempotent producers) is rebuilt from at start. Copies the
        cleaner or the compactor made come too, after newer batches of their partition (their
        originals may be gone): the caller keeps a batch only above the last it has. None when
        ``from_phy`` lies past the CommitLog end: recovery cut off a tail the caller had seen."""
        commit_log = self.commit_log
        if from_phy > commit_log.max_offset:
            return None

        def stored() -> Iterator[tuple[str, int, int, memoryview, int]]:
            for req in commit_log.iter_entries(max(from_phy, commit_log.min_offset),
                                               check_crc=False):
                topic = self.table.topics.get(req.topic)
                if topic is None or req.partition >= topic.partitions or \
                        req.phy_offset < topic.created_phy:
                    continue  # a deleted topic, or an earlier topic of the same name
                yield (req.topic, req.partition, req.queue_offset,
                       commit_log.body(req.phy_offset, req.size), req.phy_offset + req.size)
        return stored()

    def add_dispatch_listener(self, listener: Callable[[DispatchRequest], None]) -> None:
        """Called after every append is dispatched (wakes parked fetches)."""
        self.dispatcher.listeners.append(listener)

    # ---- helpers --------------------------------------------------------------------------------

    def batch_entries(self, queue: ConsumeQueue, offset: int, end: int
                      ) -> Iterator[tuple[memoryview, int]]:
        """``_entries`` of the batches that begin below ``end`` (the log compactor's walk)."""
        for entry, after in self._entries(queue, offset):
            yield entry, after
            if after >= end:
                return

    def batch_base(self, queue: ConsumeQueue, offset: int) -> int:
        """The base offset of the batch holding ``offset``."""
        phy, size, _ = queue.get(offset)
        entry = self.commit_log.entry(phy, size)
        return offset if entry is None else COUNT_AND_BASE.unpack_from(entry, 16)[1]

    def bytes_between(self, queue: ConsumeQueue, lo: int, hi: int) -> int:
        """CommitLog bytes of the batches that begin in [lo, hi): one step per batch."""
        return sum(len(entry) for entry, _ in self.batch_entries(queue, lo, hi)) if lo < hi \
            else 0

    def _entries(self, queue: ConsumeQueue, offset: int) -> Iterator[tuple[memoryview, int]]:
        """The CommitLog entries of a partition's batches from the one holding ``offset`` on,
        each with the offset after its batch."""
        end = queue.max_offset
        units = UnitReader(queue)
        while offset < end:
            phy, size, _ = units.get(offset)
            entry = self.commit_log.entry(phy, size) if size else None
            if entry is None:
                return
            count, base = COUNT_AND_BASE.unpack_from(entry, 16)
            offset = max(base + count, offset + 1)
            yield entry, offset

    def _queue(self, topic: str, partition: int) -> tuple[ConsumeQueue | None, StoreStatus]:
        record = self.table.topics.get(topic)
        if record is None or not 0 <= partition < record.partitions:
            return None, StoreStatus.UNKNOWN_TOPIC_OR_PARTITION
        return self.queues.get(topic, partition), StoreStatus.OK

    def _logical_start(self, topic: str, partition: int) -> int:
        record = self.table.topics.get(topic)
        return 0 if record is None else record.log_start_offsets.get(partition, 0)

    def _log_start(self, queue: ConsumeQueue) -> int:
        logical = self.table.topics[queue.topic].log_start_offsets.get(queue.partition, 0)
        return min(max(logical, queue.min_offset), queue.max_offset)

    def _body_at(self, queue: ConsumeQueue, offset: int) -> memoryview:
        phy, size, _ = queue.get(offset)
        return self.commit_log.body(phy, size)
