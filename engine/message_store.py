"""MessageStore: the only face of the store that the gateway sees.

It owns the CommitLog, the ConsumeQueues, the IndexFiles, the flush services and the topic
table; every state change happens on the event loop that opened it. Expected outcomes come
back as ``StoreStatus`` values; exceptions mean a bug or a damaged store. Appends, reads and
the store's life cycle are here; topic changes are TopicAdmin's, the walks over a partition's
batches PartitionLogs', and the lifecycle services (retention, the CommitLog cleaner, the log
compactor, the key query) work on the StoreParts the store hands them, never on the store.
"""
from __future__ import annotations

import errno
import logging
import os
import time
from collections.abc import Awaitable, Callable, Iterator

from commitgate.engine.allocate_mapped_file_service import AllocateMappedFileService
from commitgate.engine.body_format import BodyFormat
from commitgate.engine.checkpoint import StoreCheckpoint
from commitgate.engine.commit_log import (
    PREFIX_SIZE,
    CommitLog,
    DispatchRequest,
    body_of,
    topic_trailer,
)
from commitgate.engine.config import FlushDiskType, StoreConfig
from commitgate.engine.consume_queue import ConsumeQueue
from commitgate.engine.consume_queue_store import ConsumeQueueStore
from commitgate.engine.data_directory import check_volume, lock_directory
from commitgate.engine.dispatcher import Dispatcher
from commitgate.engine.file_handle_cache import FileHandleCache, default_capacity
from commitgate.engine.flush_commit_log_service import FlushCommitLogService
from commitgate.engine.flush_consume_queue_service import FlushConsumeQueueService
from commitgate.engine.group_commit_service import GroupCommitService
from commitgate.engine.index_builder import IndexBuilder
from commitgate.engine.key_query import KeyBatches, find_key
from commitgate.engine.mapped_file_queue import MappedFileQueue
from commitgate.engine.partition_logs import PartitionLogs
from commitgate.engine.partition_sizes import PartitionSizes
from commitgate.engine.paths import StorePaths
from commitgate.engine.record_search import RecordSearch, timestamp_search, timestamp_searches
from commitgate.engine.recovery import RecoveryReport, recover
from commitgate.engine.retention_service import RetentionService
from commitgate.engine.status import AppendResult, ReadResult, StoreStatus, TopicResult
from commitgate.engine.store_parts import StoreParts
from commitgate.engine.supervision import Supervisor
from commitgate.engine.topic_admin import TopicAdmin
from commitgate.engine.topic_table import TopicRecord, TopicTable, cleanup_policy

log = logging.getLogger(__name__)

TIMESTAMP_TYPE, LOG_APPEND_TIME = "message.timestamp.type", "LogAppendTime"


def _internal_error(topic: str, partition: int, offset: int) -> AppendResult:
    """An unexpected failure (logged with its traceback): the client learns only where."""
    return AppendResult(StoreStatus.INTERNAL_ERROR,
                        error=f"{topic}-{partition}: the batch at offset {offset} could not be "
                              f"stored (an internal error, logged by the broker)")


class MessageStore:
    def __init__(self, config: StoreConfig, body_format: BodyFormat, *, store_host: int = 0) -> None:
        self.config = config
        self.body_format = body_format
        self.paths = StorePaths(config.data_dir)
        self.store_host = store_host
        self.table = TopicTable(self.paths.topics_file)
        self.supervisor = Supervisor()
        self.offline_reason = ""  # why the store refuses writes until a restart ("": it does not)
        self._durable_end = -1  # CommitLog offset below which reads are served while offline
        self._allocator = AllocateMappedFileService(
            warm_up=config.warm_mapped_file,
            health=self.supervisor.entry("allocate-mapped-file"))
        self.commit_log = CommitLog(self._commitlog_queue(), body_format)
        capacity = config.max_open_consumequeue_files or default_capacity()
        self.handles = FileHandleCache(capacity)
        self.queues = ConsumeQueueStore(self.paths, config.consumequeue_entries_per_file,
                                        self.handles)
        self.dispatcher = Dispatcher(self.queues)
        self.logs = PartitionLogs(self.commit_log, self.queues, self.table)
        self.checkpoint: StoreCheckpoint | None = None
        self.flush_service: GroupCommitService | FlushCommitLogService | None = None
        self.consumequeue_flush_service: FlushConsumeQueueService | None = None
        self.index: IndexBuilder | None = None
        self.retention: RetentionService | None = None
        self._parts: StoreParts | None = None  # what the lifecycle services work on, once open
        self._trailers: dict[str, bytes] = {}
        self._lock_fd = -1
        self._logged_spell = 0  # the CommitLog's last refusal spell that was logged
        # Awaited before the cleaner deletes a segment; False stops the deletion. State kept
        # beside the store that is rebuilt from the CommitLog (idempotent producers) is
        # saved there: what it would replay may be in that segment alone.
        self.before_segment_delete: list[Callable[[], Awaitable[bool]]] = []
        self.open_ = False
        self.sizes = PartitionSizes(self.logs)  # DescribeLogDirs
        self.dispatcher.listeners.append(self.sizes.on_dispatch)
        self.logs.start_listeners.append(self.sizes.moved)
        self.topic_admin = TopicAdmin(self.logs, self.paths, lambda: self.offline_reason,
                                      self._topic_deleted, lambda: self.retention.wake())

    # ---- life cycle -------------------------------------------------------------------------

    async def open(self) -> RecoveryReport:
        """Lock the directory, load and recover the files, start the background services."""
        self.paths.root.mkdir(parents=True, exist_ok=True)
        check_volume(self.paths, self.config.commitlog_segment_bytes)
        self._lock_fd = lock_directory(self.paths)
        self.table.load()
        self.topic_admin.remove_queue_files_aside()
        self.checkpoint = StoreCheckpoint(self.paths.checkpoint)
        clean = not self.paths.abort.exists()
        self.commit_log.queue.load()
        self.queues.load_ends()
        report = recover(self.commit_log, self.queues, self.dispatcher, self.table,
                         self.checkpoint, clean=clean)
        self.queues.log_start = self.logs.logical_start
        for queue in self.queues.loaded():
            queue.start_at(self.logs.logical_start(queue.topic, queue.partition))
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
        try:
            drained = self.queues.close()
        except OSError as exc:  # offline, the disk may fail again: the close must go on
            if not self.offline_reason:
                raise
            log.error("store offline: closing the ConsumeQueues failed too: %s", exc)
            drained = False
        value = self.checkpoint.value
        if not self.offline_reason:  # a sync after a failed one may claim pages that were lost
            value.commitlog_flushed = self.commit_log.flush()
        if drained:
            self.queues.save_ends(self.queues.ends_table())
            value.consumequeue_flushed = self.dispatcher.dispatched_offset
        self.checkpoint.save()
        self.commit_log.queue.close()
        self._allocator.shutdown()
        self.table.close()
        if self.offline_reason:  # the abort marker stays: the next start re-verifies the tail
            log.error("store closed offline (%s); the next start re-verifies the CommitLog "
                      "from its last durable offset", self.offline_reason)
        elif drained:
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

    def _start_services(self) -> None:
        cfg = self.config
        if cfg.flush_disk_type is FlushDiskType.SYNC_FLUSH:
            self.flush_service = GroupCommitService(self.commit_log, self.checkpoint,
                                                    cfg.sync_flush_timeout_ms)
        else:
            self.flush_service = FlushCommitLogService(self.commit_log, self.checkpoint, cfg)
        self.flush_service.start(self.supervisor, self.take_offline)
        self.consumequeue_flush_service = FlushConsumeQueueService(
            self.handles, self.checkpoint, lambda: self.dispatcher.dispatched_offset,
            self.queues, cfg)
        self.consumequeue_flush_service.start(self.supervisor, self.take_offline)
        self.index = IndexBuilder(self.paths.index, self.commit_log, self.body_format,
                                  self.checkpoint, cfg, self.dispatcher.end_cell)
        self.index.start(self.supervisor)
        self._parts = StoreParts(
            config=cfg, body_format=self.body_format, logs=self.logs, dispatcher=self.dispatcher,
            flush_service=self.flush_service, index=self.index, supervisor=self.supervisor,
            store_host=self.store_host, before_segment_delete=self.before_segment_delete,
            take_offline=self.take_offline, offline_reason=lambda: self.offline_reason)
        self.retention = RetentionService(self._parts)
        self.retention.start()

    # ---- faults -------------------------------------------------------------------------------

    def take_offline(self, what: str, exc: BaseException) -> None:
        """Kafka's answer to an I/O error in a log directory: after a failed sync the kernel
        may have dropped the pages, and a later sync that succeeds would claim them. So every
        write is refused from now on (DISK_ERROR), durability waiters get DISK_ERROR, reads
        serve only what was durable before the failure, and the checkpoint is frozen with the
        abort marker kept: only a restart, which re-verifies the CommitLog from the last
        durable offset by CRC and replays the ConsumeQueues from there, brings writes back."""
        if self.offline_reason:
            return
        self.offline_reason = f"{what} failed: {exc}"
        self._durable_end = self.flush_service.flushed_offset if self.flush_service else \
            self.checkpoint.value.commitlog_flushed
        self.checkpoint.frozen = True
        for service in (self.flush_service, self.consumequeue_flush_service):
            if service is not None:
                service.halt()
        log.error("store %s is OFFLINE: %s. Writes are refused (KAFKA_STORAGE_ERROR) and reads "
                  "serve the CommitLog below offset %d, durable before the failure, until a "
                  "restart re-verifies the tail", self.paths.root, self.offline_reason,
                  self._durable_end)

    def health(self) -> dict[str, object]:
        """The store's state for an admin endpoint: offline or not, and every background
        task's state (running / restarting / failed / stopped, restarts, last error)."""
        return {"offline": bool(self.offline_reason), "offline_reason": self.offline_reason,
                "tasks": self.supervisor.health()}

    # ---- topics -------------------------------------------------------------------------------

    def topic(self, name: str) -> TopicRecord | None:
        return self.table.get(name)

    def topics(self) -> list[TopicRecord]:
        return list(self.table.topics.values())

    def create_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None,
                     *, validate_only: bool = False, max_partitions: int | None = None
                     ) -> TopicResult:
        """Create a topic with its ConsumeQueue directories, on the caller's thread."""
        return self.topic_admin.create_topic(name, partitions, configs,
                                             validate_only=validate_only,
                                             max_partitions=max_partitions)

    async def create_topic_off_loop(self, name: str, partitions: int,
                                    configs: dict[str, str] | None = None, *,
                                    max_partitions: int | None = None) -> TopicResult:
        """``create_topic`` with the file system work on the topic table's thread."""
        return await self.topic_admin.create_topic_off_loop(name, partitions, configs,
                                                            max_partitions=max_partitions)

    def delete_topic(self, name: str) -> TopicResult:
        """Delete a topic and its ConsumeQueue files, on the caller's thread."""
        return self.topic_admin.delete_topic(name)

    async def delete_topic_off_loop(self, name: str) -> TopicResult:
        """``delete_topic`` with the file system work on the topic table's thread."""
        return await self.topic_admin.delete_topic_off_loop(name)

    def create_partitions(self, name: str, total: int, *, validate_only: bool = False,
                          max_partitions: int | None = None) -> TopicResult:
        """Grow a topic to ``total`` partitions, on the caller's thread."""
        return self.topic_admin.create_partitions(name, total, validate_only=validate_only,
                                                  max_partitions=max_partitions)

    async def create_partitions_off_loop(self, name: str, total: int, *,
                                         max_partitions: int | None = None) -> TopicResult:
        """``create_partitions`` with the file system work on the topic table's thread."""
        return await self.topic_admin.create_partitions_off_loop(name, total,
                                                                 max_partitions=max_partitions)

    def alter_topic_configs(self, name: str, changes: dict[str, str | None], *,
                            save: bool = True) -> TopicResult:
        """Set (value) or remove (None) topic configs; ``save=False``: the caller saves."""
        return self.topic_admin.alter_topic_configs(name, changes, save=save)

    def compacted(self, name: str) -> bool:
        """Whether the topic's cleanup.policy includes compact (its records need keys)."""
        record = self.table.get(name)
        return record is not None and "compact" in cleanup_policy(record, self.config)

    def _topic_deleted(self, name: str) -> None:
        """Forget what the store keeps of a deleted topic (TopicAdmin calls it)."""
        self.sizes.forget(name)
        self._trailers.pop(name, None)

    # ---- data -----------------------------------------------------------------------------------

    @property
    def key_room(self) -> int:
        """Bytes of record keys ``append(keys=...)`` may hand to the IndexBuilder now (0: the
        index is off, or full of keys it has not reached yet)."""
        return 0 if self.index is None else self.index.key_room

    def append(self, topic: str, partition: int, body: memoryview, *, offset_count: int,
               max_timestamp: int, sys_flag: int = 0, born_host: int = 0,
               keys: list[bytes] | None = None) -> AppendResult:
        """Store one batch (a writable buffer; the base offset is written into it in place).
        ``keys``: exactly ``BodyFormat.keys`` of the body, when the caller has read them (the
        IndexBuilder then need not)."""
        record = self.table.topics.get(topic)  # one lookup: this runs for every produced batch
        if record is None or not 0 <= partition < record.partitions:
            return AppendResult(StoreStatus.UNKNOWN_TOPIC_OR_PARTITION)
        if not self.open_:
            return AppendResult(StoreStatus.STORE_CLOSED)
        if self.offline_reason:
            return AppendResult(StoreStatus.DISK_ERROR,
                                error=f"{topic}-{partition}: the log directory is offline after "
                                      f"an I/O error; writes resume after a broker restart")
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
        except Exception:  # nothing was written: the position moves on success
            log.exception("append to %s-%d at offset %d failed", topic, partition, base)
            return _internal_error(topic, partition, base)
        try:
            if keys is not None:  # before the dispatch: the IndexBuilder walks up to its end
                self.index.hand_over(req.phy_offset, keys)
            self.dispatcher.dispatch(req, queue)
        except BaseException as exc:  # whatever it is, the entry must not outlive the failure
            self._undo_append(queue, req)
            if isinstance(exc, OSError):
                log.error("ConsumeQueue %s-%d at offset %d failed: %s", topic, partition, base,
                          exc)
                return AppendResult(StoreStatus.DISK_ERROR, error=str(exc))
            if not isinstance(exc, Exception):
                raise
            log.exception("dispatching %s-%d at offset %d failed; the append was undone",
                          topic, partition, base)
            return _internal_error(topic, partition, base)
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
        CommitLog entry may come back at the next start (the client was told it failed). An
        undo that fails takes the store offline: the entry would otherwise be replayed."""
        self.index.handoff.drop_from(req.phy_offset)  # the next entry goes where it was
        self.dispatcher.dispatched_offset = min(self.dispatcher.dispatched_offset,
                                                req.phy_offset)
        try:
            queue.truncate_offset(req.queue_offset)
            self.commit_log.rollback(req.phy_offset)
        except Exception as exc:  # logged with its traceback, store offline
            log.exception("undoing the failed append to %s-%d at offset %d failed too",
                          req.topic, req.partition, req.queue_offset)
            self.take_offline(f"undoing the append to {req.topic}-{req.partition} at offset "
                              f"{req.queue_offset}", exc)

    async def wait_durable(self, phy_end: int) -> StoreStatus:
        """Under SYNC_FLUSH, wait until the CommitLog is on disk up to ``phy_end``."""
        return await self.flush_service.wait_durable(phy_end)

    def read(self, topic: str, partition: int, offset: int, max_bytes: int, *,
             min_one: bool = True, upto: int | None = None) -> ReadResult:
        """Batches from the one holding ``offset`` on, up to ``max_bytes`` (at least one batch
        when ``min_one``), as zero-copy slices of the CommitLog; with ``upto``, only batches
        that end at or before that offset (a reader's stable offset)."""
        logs = self.logs
        queue, status = logs.queue(topic, partition)
        if queue is None:
            return ReadResult(status)
        start, end = logs.log_start(queue), self._readable_end(queue)
        result = ReadResult(StoreStatus.OK, [], offset, start, end)
        # offsets past ``end`` (offline: not durable) read as nothing yet, as above Kafka's
        # high watermark; out of range is past the queue's end only
        if not start <= offset <= queue.max_offset:
            result.status = StoreStatus.OFFSET_OUT_OF_RANGE
            return result
        total = 0
        buffers = result.buffers
        limit = end if upto is None else min(end, upto)
        for entry, after in logs.entries(queue, offset):
            body = body_of(entry)
            if after > limit or total + len(body) > max_bytes and (buffers or not min_one):
                break
            buffers.append(body)
            total += len(body)
            offset = after
        result.next_offset = offset
        return result

    def log_start_offset(self, topic: str, partition: int) -> int:
        """The partition's first offset readers see, or -1 when unknown."""
        return self.logs.log_start_offset(topic, partition)

    def log_end_offset(self, topic: str, partition: int) -> int:
        """The end readers see: the queue's end, or while offline the end of what was
        durable (Kafka's high watermark, which readers never pass)."""
        queue, _ = self.logs.queue(topic, partition)
        return -1 if queue is None else self._readable_end(queue)

    def _readable_end(self, queue: ConsumeQueue) -> int:
        """The offset after the partition's batches that end in the CommitLog below
        ``_durable_end`` while offline. Units ordered by offset have ascending phy, but for
        repointed ones, which point at copies synced before the repoint: so "ends past the
        durable end" holds for a suffix of the offsets only, and a binary search finds it."""
        if not self.offline_reason:
            return queue.max_offset
        durable = self._durable_end
        return queue.search_offset(lambda unit: unit[0] + unit[1] > durable, queue.min_offset)

    async def partition_size(self, topic: str, partition: int) -> int:
        """Bytes of the CommitLog entries holding the partition's batches from its log start
        on (DescribeLogDirs), or -1 for an unknown partition: counters, see PartitionSizes."""
        return await self.sizes.size(topic, partition)

    def offset_for_timestamp(self, topic: str, partition: int, timestamp: int
                             ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``timestamp``, or None."""
        found = (search.run() for search in self.timestamp_searches(topic, partition, timestamp))
        return next((f for f in found if f is not None), None)

    def max_timestamp_offset(self, topic: str, partition: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the record with the largest timestamp, or None when empty."""
        return self.max_timestamp_search(topic, partition).run()

    def max_timestamp_search(self, topic: str, partition: int) -> RecordSearch:
        """The batch holding the record with the largest timestamp, to decode."""
        return timestamp_search(self.logs, self.body_format, topic, partition, None, -1)

    def timestamp_searches(self, topic: str, partition: int, timestamp: int
                           ) -> Iterator[RecordSearch]:
        """The batches to decode, in turn, until one has a record at or after ``timestamp``."""
        return timestamp_searches(self.logs, self.body_format, topic, partition, timestamp)

    def delete_records(self, topic: str, partition: int, before: int) -> tuple[StoreStatus, int]:
        """Advance the log start offset to ``before`` (-1: the end); returns the new one."""
        return self.topic_admin.delete_records(topic, partition, before)

    async def delete_records_off_loop(self, wanted: list[tuple[str, int, int]]
                                      ) -> list[tuple[StoreStatus, int]]:
        """``delete_records`` of (topic, partition, before) each, with one save of the table,
        on its thread."""
        return await self.topic_admin.delete_records_off_loop(wanted)

    async def lookup_key(self, topic: str, key: bytes, begin_ms: int = 0, end_ms: int = 2**62,
                         max_count: int = 64) -> list[tuple[int, int]]:
        """(partition, base offset) of batches holding a record with ``key``, newest first.
        Waits (boundedly) for the IndexFile builder to reach what was appended before the call."""
        found = await self.key_batches(topic, key, begin_ms, end_ms, max_count)
        return [(b.partition, b.base_offset) for b in found.batches
                if key in self.body_format.keys(b.body)]

    async def key_batches(self, topic: str, key: bytes, begin_ms: int = 0, end_ms: int = 2**62,
                          max_count: int = 64) -> KeyBatches:
        """The batches that may hold ``key``, newest first, for a caller that decodes them."""
        return await find_key(self._parts, topic, key, begin_ms, end_ms, max_count)

    def iter_batches(self, from_phy: int
                     ) -> Iterator[tuple[str, int, int, memoryview, int]] | None:
        """Stored batches from CommitLog offset ``from_phy`` on (PartitionLogs.stored_batches):
        what state kept beside the store (idempotent producers) is rebuilt from at start."""
        return self.logs.stored_batches(from_phy)

    def add_dispatch_listener(self, listener: Callable[[DispatchRequest], None]) -> None:
        """Called after every append is dispatched (wakes parked fetches)."""
        self.dispatcher.listeners.append(listener)
