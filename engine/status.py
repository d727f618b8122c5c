"""Expected outcomes as status values (RocketMQ's PutMessageStatus); exceptions are for the rest."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field


class StoreStatus(enum.Enum):
    OK = "OK"
    UNKNOWN_TOPIC_OR_PARTITION = "UNKNOWN_TOPIC_OR_PARTITION"
    INVALID_TOPIC = "INVALID_TOPIC"
    INVALID_PARTITIONS = "INVALID_PARTITIONS"
    TOPIC_ALREADY_EXISTS = "TOPIC_ALREADY_EXISTS"
    PARTITION_LIMIT = "PARTITION_LIMIT"  # over the broker's partition cap
    ENTRY_TOO_LARGE = "ENTRY_TOO_LARGE"  # does not fit in one CommitLog segment
    OFFSET_OUT_OF_RANGE = "OFFSET_OUT_OF_RANGE"
    DISK_ERROR = "DISK_ERROR"  # ENOSPC, EIO, read-only data directory, the store offline
    FLUSH_TIMEOUT = "FLUSH_TIMEOUT"  # SYNC_FLUSH waited past sync_flush_timeout_ms
    STORE_CLOSED = "STORE_CLOSED"
    INTERNAL_ERROR = "INTERNAL_ERROR"  # an unexpected exception, logged; nothing was stored


@dataclass(slots=True)
class AppendResult:
    status: StoreStatus
    base_offset: int = -1
    log_append_time: int = -1  # ms, -1 unless the topic uses LogAppendTime
    phy_offset: int = -1  # where the CommitLog entry starts
    phy_end: int = -1  # where it ends: await durability up to here
    error: str = ""


@dataclass(slots=True)
class ReadResult:
    status: StoreStatus
    buffers: list[memoryview] = field(default_factory=list)  # batch bodies, slices of mapped files
    next_offset: int = -1  # the offset after the last batch returned
    log_start_offset: int = -1
    log_end_offset: int = -1


@dataclass(slots=True)
class TopicResult:
    status: StoreStatus
    error: str = ""
