"""Store settings: one dataclass, defaults follow RocketMQ's MessageStoreConfig where one exists."""
from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

GIB = 1 << 30


class FlushDiskType(enum.Enum):
    """When an append counts as durable (RocketMQ's flushDiskType)."""

    ASYNC_FLUSH = "ASYNC_FLUSH"  # page cache now, fdatasync every interval / N dirty pages
    SYNC_FLUSH = "SYNC_FLUSH"  # group commit: waiters share one fdatasync


@dataclass
class StoreConfig:
    data_dir: Path = Path("./data")
    commitlog_segment_bytes: int = GIB  # mappedFileSizeCommitLog
    consumequeue_entries_per_file: int = 300_000  # mappedFileSizeConsumeQueue / 20
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    flush_interval_ms: int = 500  # flushIntervalCommitLog
    flush_least_pages: int = 4  # flushCommitLogLeastPages
    flush_thorough_interval_ms: int = 10_000  # flushCommitLogThoroughInterval
    sync_flush_timeout_ms: int = 5_000  # syncFlushTimeout
    consumequeue_flush_interval_ms: int = 1_000  # flushIntervalConsumeQueue
    consumequeue_flush_least_pages: int = 2  # flushConsumeQueueLeastPages
    consumequeue_flush_thorough_interval_ms: int = 10_000  # flushConsumeQueueThoroughInterval
    warm_mapped_file: bool = False  # warmMapedFileEnable: touch every page of a new segment
    index_enable: bool = True  # build IndexFile keys behind the dispatcher
    index_hash_slots: int = 5_000_000  # maxHashSlotNum
    index_max_entries: int = 20_000_000  # maxIndexNum
    # Retention. Per-topic retention.ms / retention.bytes advance log start offsets; the
    # CommitLog cleaner frees segments by relocating the live entries out of the oldest ones
    # (docs/architecture.md, "The log's lifecycle"). Nothing is ever deleted by age or by disk
    # usage alone: a full disk refuses writes.
    retention_check_interval_ms: int = 300_000  # log.retention.check.interval.ms
    log_retention_ms: int = 7 * 24 * 3600 * 1000  # broker default for retention.ms
    log_retention_bytes: int = -1  # broker default for retention.bytes
    # Relocate the oldest segment while the sealed segments hold more than this many times
    # their live bytes.
    cleaner_garbage_factor: float = 2.0
    cleaner_io_max_bytes_per_second: float = 64 * 1024 * 1024  # log.cleaner.io.max.bytes.per.second
    # Compaction: broker defaults of the topic configs of the same names (Kafka's log.cleaner.*)
    log_cleanup_policy: str = "delete"  # log.cleanup.policy
    min_cleanable_dirty_ratio: float = 0.5  # log.cleaner.min.cleanable.ratio
    min_compaction_lag_ms: int = 0  # log.cleaner.min.compaction.lag.ms
    max_compaction_lag_ms: int = 2**63 - 1  # log.cleaner.max.compaction.lag.ms
    delete_retention_ms: int = 86_400_000  # log.cleaner.delete.retention.ms
    cleaner_dedupe_buffer_size: int = 128 * 1024 * 1024  # log.cleaner.dedupe.buffer.size
    max_open_consumequeue_files: int = 0  # 0 = derived from RLIMIT_NOFILE

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir)
        if isinstance(self.flush_disk_type, str):
            self.flush_disk_type = FlushDiskType(self.flush_disk_type.upper())
        if self.commitlog_segment_bytes < 4096:
            raise ValueError(f"commitlog segment size {self.commitlog_segment_bytes} < 4096")
        if self.consumequeue_entries_per_file < 1:
            raise ValueError("consumequeue_entries_per_file must be positive")
        if self.cleaner_garbage_factor <= 1:
            raise ValueError(f"cleaner garbage factor {self.cleaner_garbage_factor} must be "
                             f"above 1 (relocation copies live data out of garbage)")
        policy = {item.strip() for item in self.log_cleanup_policy.split(",")}
        if not policy or not policy <= {"delete", "compact"}:
            raise ValueError(f"cleanup policy {self.log_cleanup_policy!r}: a list of delete "
                             f"and compact")
        if not 0 <= self.min_cleanable_dirty_ratio <= 1:
            raise ValueError(f"min cleanable dirty ratio {self.min_cleanable_dirty_ratio} is "
                             f"outside [0, 1]")
        if self.cleaner_io_max_bytes_per_second <= 0:
            raise ValueError("cleaner I/O rate must be positive")
