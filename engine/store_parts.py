"""StoreParts: what the lifecycle services work on, handed to them instead of the whole store.

The MessageStore builds it once its flush service and IndexBuilder run, and gives it to the
RetentionService (which hands it to the CommitLogCleaner and the LogCompactor) and to the key
query. The services sit below the store: they never import it, and the store's own state
(offline or not) reaches them only through the two callables here.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from commitgate.engine.body_format import BodyFormat
from commitgate.engine.config import StoreConfig
from commitgate.engine.dispatcher import Dispatcher
from commitgate.engine.flush_commit_log_service import FlushCommitLogService
from commitgate.engine.group_commit_service import GroupCommitService
from commitgate.engine.index_builder import IndexBuilder
from commitgate.engine.partition_logs import PartitionLogs
from commitgate.engine.supervision import Supervisor


@dataclass(frozen=True, slots=True)
class StoreParts:
    config: StoreConfig
    body_format: BodyFormat
    logs: PartitionLogs  # the CommitLog, the ConsumeQueues and the topic table, and their walks
    dispatcher: Dispatcher
    flush_service: GroupCommitService | FlushCommitLogService
    index: IndexBuilder
    supervisor: Supervisor
    store_host: int  # written into every CommitLog entry, copies too
    # awaited before a CommitLog segment is deleted; False keeps it (MessageStore.__init__)
    before_segment_delete: list[Callable[[], Awaitable[bool]]]
    take_offline: Callable[[str, BaseException], None]  # after a failed sync: refuse writes
    offline_reason: Callable[[], str]  # why the store refuses writes ("": it does not)
