"""TopicAdmin: creates, grows, reconfigures and deletes topics, and deletes records (moves
log start offsets), in the topic table and on disk.

Each change comes in two forms: one that does its file system work on the caller's thread,
and an ``_off_loop`` one that does it on the topic table's thread (requests see a creation or
growth once it is on disk, a deletion at once). Topic changes off the loop run one at a time.
A change is refused while the store is offline, as appends are: it writes the table and files.
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

from commitgate.engine.partition_logs import PartitionLogs
from commitgate.engine.paths import StorePaths
from commitgate.engine.status import StoreStatus, TopicResult
from commitgate.engine.topic_table import TopicRecord, topic_name_error

log = logging.getLogger(__name__)


class TopicAdmin:
    def __init__(self, logs: PartitionLogs, paths: StorePaths,
                 offline_reason: Callable[[], str], on_delete: Callable[[str], None],
                 wake_cleaner: Callable[[], None]) -> None:
        self._logs = logs
        self._table = logs.table
        self._queues = logs.queues
        self._paths = paths
        self._offline_reason = offline_reason
        self._on_delete = on_delete  # the store forgets what it keeps of a deleted topic
        self._wake_cleaner = wake_cleaner  # runs a retention pass now
        self._changes = asyncio.Lock()  # creations, growths, deletions off the loop

    # ---- creation -----------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int, configs: dict[str, str] | None = None,
                     *, validate_only: bool = False, max_partitions: int | None = None
                     ) -> TopicResult:
        checked = self._creatable(name, partitions, max_partitions)
        if checked.status is not StoreStatus.OK or validate_only:
            return checked
        record = self._new_record(name, partitions, configs)
        self._queues.create_dirs(name, range(partitions))
        self._table.topics[name] = record
        self._table.save()
        log.info("created topic %s with %d partitions (id %s)", name, partitions, record.topic_id)
        return TopicResult(StoreStatus.OK)

    async def create_topic_off_loop(self, name: str, partitions: int,
                                    configs: dict[str, str] | None = None, *,
                                    max_partitions: int | None = None) -> TopicResult:
        """``create_topic`` with the directories and the table's fsync on the table's thread;
        requests see the topic once it is on disk. Topic changes off the loop run one at a
        time: a creation racing another of the same name finds it there."""
        async with self._changes:
            checked = self._creatable(name, partitions, max_partitions)
            if checked.status is not StoreStatus.OK:
                return checked
            record = self._new_record(name, partitions, configs)
            result = await self._save_pending(
                record, lambda: self._queues.create_dirs(name, range(partitions)))
        if result.status is StoreStatus.OK:
            log.info("created topic %s with %d partitions (id %s)", name, partitions,
                     record.topic_id)
        return result

    def _offline(self, name: str) -> TopicResult | None:
        """Topic changes write the table and make files: refused, as appends are, offline."""
        if not self._offline_reason():
            return None
        return TopicResult(StoreStatus.DISK_ERROR, f"topic '{name}': the log directory is "
                                                   f"offline after an I/O error until a restart")

    def _creatable(self, name: str, partitions: int, max_partitions: int | None) -> TopicResult:
        offline = self._offline(name)
        if offline is not None:
            return offline
        error = topic_name_error(name)
        if error:
            return TopicResult(StoreStatus.INVALID_TOPIC, error)
        if name in self._table.topics or name in self._table.pending:
            return TopicResult(StoreStatus.TOPIC_ALREADY_EXISTS, f"topic '{name}' already exists")
        if partitions < 1:
            return TopicResult(StoreStatus.INVALID_PARTITIONS,
                               f"topic '{name}': partitions must be at least 1, got {partitions}")
        return self._within_limit(name, partitions, max_partitions)

    def _within_limit(self, name: str, adding: int, limit: int | None) -> TopicResult:
        """KIP-578's max.broker.partitions: the partitions of all topics together."""
        now = self._table.partition_count()
        if limit is not None and now + adding > limit:
            return TopicResult(StoreStatus.PARTITION_LIMIT, (
                f"Adding {adding} partition(s) to topic '{name}' would take this broker to "
                f"{now + adding} partitions ({now} now), over max.broker.partitions={limit}."))
        return TopicResult(StoreStatus.OK)

    def _new_record(self, name: str, partitions: int, configs: dict[str, str] | None
                    ) -> TopicRecord:
        return TopicRecord(name, partitions, configs=dict(configs or {}),
                           created_phy=self._logs.commit_log.max_offset)

    async def _save_pending(self, record: TopicRecord, work: Callable[[], None]) -> TopicResult:
        """Write the table with ``record`` pending (after ``work``, off the loop), then let
        requests see it. A failure leaves the topic as it was."""
        table = self._table
        table.pending[record.name] = record
        try:
            await table.save_off_loop(work)
        except OSError as exc:
            log.error("writing topic %s with %d partitions failed: %s", record.name,
                      record.partitions, exc)
            table.pending.pop(record.name, None)
            try:  # a save while it was pending may have written it
                await table.save_off_loop()
            except OSError:
                pass  # logged above; the next save writes the table without it
            return TopicResult(StoreStatus.DISK_ERROR, f"topic '{record.name}': {exc}")
        except BaseException:
            table.pending.pop(record.name, None)
            raise
        table.publish(record.name)
        return TopicResult(StoreStatus.OK)

    # ---- deletion -----------------------------------------------------------------------------

    def delete_topic(self, name: str) -> TopicResult:
        if self._table.topics.pop(name, None) is None:
            return TopicResult(StoreStatus.UNKNOWN_TOPIC_OR_PARTITION, f"no topic '{name}'")
        self._table.save()
        self._forget_topic(name)
        return TopicResult(StoreStatus.OK)

    async def delete_topic_off_loop(self, name: str) -> TopicResult:
        """``delete_topic`` with the file system work on the table's thread: requests stop
        seeing the topic at once, the answer comes once the table is synced without it, and
        its ConsumeQueue directory, renamed aside on the loop (one rename: a directory per
        partition took 1 ms each to remove here, 20 s for 20,000), is removed after."""
        async with self._changes:
            if self._table.topics.pop(name, None) is None:
                return TopicResult(StoreStatus.UNKNOWN_TOPIC_OR_PARTITION, f"no topic '{name}'")
            aside = self._queue_files_aside(name)
            try:
                await self._table.save_off_loop()
            except OSError as exc:
                log.error("saving the topic table without %s failed: %s", name, exc)
                return TopicResult(StoreStatus.DISK_ERROR, f"topic '{name}': {exc}")
            finally:
                self._forget_topic(name)
                if aside is not None:
                    self._table.run_later(lambda: shutil.rmtree(aside, ignore_errors=True))
        return TopicResult(StoreStatus.OK)

    def remove_queue_files_aside(self) -> None:
        """Directories of deleted topics a stop came before the removal of (off the loop)."""
        queues = self._paths.consumequeue
        for aside in queues.glob("~deleted~*") if queues.is_dir() else ():
            self._table.run_later(lambda path=aside: shutil.rmtree(path, ignore_errors=True))

    def _queue_files_aside(self, name: str) -> Path | None:
        """Rename a topic's ConsumeQueue directory to a name no topic can have (``~``)."""
        directory = self._paths.consumequeue_topic_dir(name)
        aside = directory.with_name(f"~deleted~{name}~{uuid.uuid4().hex}")
        try:
            directory.rename(aside)
        except OSError as exc:  # none (no partition had one), or it is removed on the loop
            if not isinstance(exc, FileNotFoundError):
                log.warning("could not move %s aside: %s", directory, exc)
            return None
        return aside

    def _forget_topic(self, name: str) -> None:
        self._queues.delete_topic(name)
        self._logs.commit_log.ledger.invalidate()  # its entries died: the next pass walks again
        self._on_delete(name)
        log.info("deleted topic %s", name)
        self._space_freed()

    def _space_freed(self) -> None:
        if self._logs.commit_log.refusing:  # the space may end the refusal: clean now
            self._wake_cleaner()

    # ---- growth and configs -------------------------------------------------------------------

    def create_partitions(self, name: str, total: int, *, validate_only: bool = False,
                          max_partitions: int | None = None) -> TopicResult:
        checked = self._growable(name, total, max_partitions)
        if checked.status is StoreStatus.OK and not validate_only:
            record = self._table.topics[name]
            self._queues.create_dirs(name, range(record.partitions, total))
            record.partitions = total
            self._table.save()
        return checked

    async def create_partitions_off_loop(self, name: str, total: int, *,
                                         max_partitions: int | None = None) -> TopicResult:
        """``create_partitions`` with the directories and the table's fsync on the table's
        thread; requests see the new partitions once they are on disk."""
        async with self._changes:
            checked = self._growable(name, total, max_partitions)
            if checked.status is not StoreStatus.OK:
                return checked
            old = self._table.topics[name].partitions
            grown = dataclasses.replace(self._table.topics[name], partitions=total)
            return await self._save_pending(
                grown, lambda: self._queues.create_dirs(name, range(old, total)))

    def _growable(self, name: str, total: int, max_partitions: int | None) -> TopicResult:
        offline = self._offline(name)
        if offline is not None:
            return offline
        record = self._table.get(name)
        if record is None:
            return TopicResult(StoreStatus.UNKNOWN_TOPIC_OR_PARTITION, f"no topic '{name}'")
        if total <= record.partitions:
            return TopicResult(StoreStatus.INVALID_PARTITIONS,
                               f"topic '{name}' has {record.partitions} partitions; "
                               f"the new count {total} must be larger")
        return self._within_limit(name, total - record.partitions, max_partitions)

    def alter_topic_configs(self, name: str, changes: dict[str, str | None], *,
                            save: bool = True) -> TopicResult:
        """Set (value) or remove (None) topic configs; the store reads retention and timestamps.
        With ``save=False`` the caller writes the table (``table.save_off_loop``)."""
        record = self._table.get(name)
        if record is None:
            return TopicResult(StoreStatus.UNKNOWN_TOPIC_OR_PARTITION, f"no topic '{name}'")
        for key, value in changes.items():
            if value is None:
                record.configs.pop(key, None)
            else:
                record.configs[key] = value
        if save:
            self._table.save()
        return TopicResult(StoreStatus.OK)

    # ---- records ------------------------------------------------------------------------------

    def delete_records(self, topic: str, partition: int, before: int) -> tuple[StoreStatus, int]:
        """Advance the log start offset to ``before`` (-1: the end); returns the new one."""
        result = self._delete_records(topic, partition, before)
        if result[0] is StoreStatus.OK:
            self._table.save()
        return result

    async def delete_records_off_loop(self, wanted: list[tuple[str, int, int]]
                                      ) -> list[tuple[StoreStatus, int]]:
        """``delete_records`` of (topic, partition, before) each, with one save of the table,
        on its thread."""
        results = [self._delete_records(*one) for one in wanted]
        if any(status is StoreStatus.OK for status, _ in results):
            await self._table.save_off_loop()
        return results

    def _delete_records(self, topic: str, partition: int, before: int
                        ) -> tuple[StoreStatus, int]:
        logs = self._logs
        queue, status = logs.queue(topic, partition)
        if queue is None:
            return status, -1
        if self._offline_reason():
            return StoreStatus.DISK_ERROR, -1
        target = queue.max_offset if before == -1 else before
        if not 0 <= target <= queue.max_offset:
            return StoreStatus.OFFSET_OUT_OF_RANGE, logs.log_start(queue)
        logs.advance_log_start(topic, partition, target)
        self._space_freed()
        return StoreStatus.OK, logs.log_start(queue)
