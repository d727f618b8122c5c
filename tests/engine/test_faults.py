"""Faults the store must not survive silently: a failed fdatasync takes it offline, a failing
background task is logged and restarted (or takes it offline), a failed append leaves no trace.

Fault injection is in-process: ``os.fdatasync`` fails for the files named, or a service's step
raises; the store itself, its files and its recovery are the real ones.
"""
from __future__ import annotations

import asyncio
import errno
import logging
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from commitgate.engine import MessageStore, StoreConfig, StoreStatus, supervision
from commitgate.engine.allocate_mapped_file_service import AllocateMappedFileService
from commitgate.engine.checkpoint import Checkpoint
from commitgate.engine.commit_log import CommitLog
from commitgate.engine.dispatcher import Dispatcher
from commitgate.engine.flush_commit_log_service import FlushCommitLogService
from commitgate.engine.flush_consume_queue_service import FlushConsumeQueueService
from commitgate.engine.group_commit_service import GroupCommitService
from commitgate.engine.index_builder import IndexBuilder
from commitgate.protocol.record_batch import KafkaBodyFormat, decode_records
from tests.engine.conftest import SMALL, batch, open_store

DEADLINE_S = 20.0


class FailingDisk:
    """``os.fdatasync`` raising EIO for files whose path holds ``part`` while ``on``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, part: str) -> None:
        self.part, self.on, self.failures = part, False, 0
        real = os.fdatasync

        def fdatasync(fd: int) -> None:
            if self.on and self.part in os.readlink(f"/proc/self/fd/{fd}"):
                self.failures += 1
                raise OSError(errno.EIO, os.strerror(errno.EIO))
            real(fd)
        monkeypatch.setattr(os, "fdatasync", fdatasync)


def fail_once(monkeypatch: pytest.MonkeyPatch, cls: type, name: str) -> list[int]:
    """Make ``cls.name`` raise RuntimeError on its next call only; returns the call counter."""
    original = getattr(cls, name)
    calls = [0]

    def check() -> None:
        calls[0] += 1
        if calls[0] == 1:
            raise RuntimeError(f"injected fault in {cls.__name__}.{name}")

    if asyncio.iscoroutinefunction(original):
        async def wrapper(self, *args, **kwargs):
            check()
            return await original(self, *args, **kwargs)
    else:
        def wrapper(self, *args, **kwargs):
            check()
            return original(self, *args, **kwargs)
    monkeypatch.setattr(cls, name, wrapper)
    return calls


async def until(condition: Callable[[], bool], what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while not condition():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


def append(store: MessageStore, value: bytes, partition: int = 0):
    return store.append("t", partition, batch([value]), offset_count=1, max_timestamp=1_000)


def values(store: MessageStore, partition: int = 0) -> list[bytes]:
    result = store.read("t", partition, 0, 1 << 20)
    return [r.value for body in result.buffers for r in decode_records(bytes(body))]


def stored_checkpoint(store_dir: Path) -> Checkpoint:
    return Checkpoint.decode((store_dir / "checkpoint").read_bytes())


@pytest.fixture(autouse=True)
def quick_restarts(monkeypatch):
    monkeypatch.setattr(supervision, "RESTART_MIN_S", 0.01)


def offline_records(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.ERROR and "OFFLINE" in r.message]


# ---- a failed fdatasync ------------------------------------------------------------------------

def test_failed_commitlog_fsync_takes_the_store_offline_until_a_restart(
        tmp_path, run, monkeypatch, caplog):
    disk = FailingDisk(monkeypatch, "/commitlog/")

    async def body():
        async with open_store(tmp_path, flush_disk_type="SYNC_FLUSH") as store:
            store.create_topic("t", 1)
            first = append(store, b"durable")
            assert await store.wait_durable(first.phy_end) is StoreStatus.OK
            await store.consumequeue_flush_service.flush()  # saves the checkpoint
            assert stored_checkpoint(store.paths.root).commitlog_flushed == first.phy_end
            disk.on = True
            second = append(store, b"in the page cache only")
            assert second.status is StoreStatus.OK
            assert await store.wait_durable(second.phy_end) is StoreStatus.DISK_ERROR
            assert disk.failures == 1
            disk.on = False  # a sync that would now succeed must not be trusted
            assert await store.wait_durable(second.phy_end) is StoreStatus.DISK_ERROR
            refused = append(store, b"refused")
            assert refused.status is StoreStatus.DISK_ERROR
            assert "t-0" in refused.error and "offline" in refused.error
            # reads serve what was durable before the failure, and no further
            assert values(store) == [b"durable"]
            assert store.log_end_offset("t", 0) == 1
            assert store.read("t", 0, 1, 1 << 20).status is StoreStatus.OK
            health = store.health()
            assert health["offline"] and "fdatasync" in health["offline_reason"]
            await store.consumequeue_flush_service.flush()  # saves nothing now
            assert stored_checkpoint(store.paths.root).commitlog_flushed == first.phy_end
        assert (tmp_path / "data" / "abort").exists(), "the next start must be unclean"
        [record] = offline_records(caplog)
        assert "commitlog" in record.message and "Input/output error" in record.message

        config = StoreConfig(data_dir=tmp_path / "data", **SMALL)
        store = MessageStore(config, KafkaBodyFormat())
        report = await store.open()
        try:
            assert not report.clean
            assert values(store)[0] == b"durable"
            again = append(store, b"after the restart")
            assert again.status is StoreStatus.OK
            assert values(store)[-1] == b"after the restart"
            assert not store.health()["offline"]
        finally:
            await store.close()
    run(body())


def test_failed_async_flush_refuses_writes_and_durability(tmp_path, run, monkeypatch, caplog):
    disk = FailingDisk(monkeypatch, "/commitlog/")

    async def body():
        async with open_store(tmp_path, flush_interval_ms=10, flush_least_pages=0) as store:
            store.create_topic("t", 1)
            first = append(store, b"flushed")
            await until(lambda: store.flush_service.flushed_offset >= first.phy_end, "a flush")
            disk.on = True
            second = append(store, b"not flushed")
            await until(lambda: store.offline_reason != "", "the store to go offline")
            assert await store.wait_durable(second.phy_end) is StoreStatus.DISK_ERROR
            assert await store.wait_durable(first.phy_end) is StoreStatus.OK
            assert append(store, b"refused").status is StoreStatus.DISK_ERROR
            assert values(store) == [b"flushed"]
            assert await store.flush_service.sync_to(second.phy_end) is StoreStatus.DISK_ERROR
            failures = disk.failures
        assert disk.failures == failures, "closing an offline store syncs the CommitLog again"
        assert len(offline_records(caplog)) == 1
    run(body())


def test_failed_consumequeue_fsync_takes_the_store_offline(tmp_path, run, monkeypatch, caplog):
    disk = FailingDisk(monkeypatch, "/consumequeue/")

    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 1)
            assert append(store, b"a").status is StoreStatus.OK
            disk.on = True
            await store.consumequeue_flush_service.flush()
            assert store.offline_reason.startswith("fdatasync of ConsumeQueue files")
            assert append(store, b"b").status is StoreStatus.DISK_ERROR
        assert len(offline_records(caplog)) == 1

        async with open_store(tmp_path) as store:  # replays the queue from the CommitLog
            assert values(store) == [b"a"]
            assert append(store, b"b").status is StoreStatus.OK
    run(body())


def test_failed_index_fsync_leaves_the_store_writable(tmp_path, run, monkeypatch, caplog):
    disk = FailingDisk(monkeypatch, "/index/")

    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 1)
            indexed_before = store.checkpoint.value.index_flushed
            disk.on = True
            store.append("t", 0, batch([b"v"], keys=[b"k"]), offset_count=1,
                         max_timestamp=1_000)
            entry = store.supervisor.tasks["index-builder"]
            await until(lambda: entry.last_error != "", "the index flush to fail")
            assert "Input/output error" in entry.last_error
            assert not store.offline_reason
            assert append(store, b"w").status is StoreStatus.OK
            assert store.checkpoint.value.index_flushed == indexed_before
            disk.on = False
        assert any("IndexFiles failed" in r.message for r in caplog.records)
    run(body())


# ---- supervision -------------------------------------------------------------------------------

def test_group_commit_failure_answers_waiters_and_takes_the_store_offline(
        tmp_path, run, monkeypatch, caplog):
    fail_once(monkeypatch, GroupCommitService, "_sync_round")

    async def body():
        async with open_store(tmp_path, flush_disk_type="SYNC_FLUSH",
                              sync_flush_timeout_ms=60_000) as store:
            store.create_topic("t", 1)
            result = append(store, b"x")
            status = await asyncio.wait_for(store.wait_durable(result.phy_end), DEADLINE_S)
            assert status is StoreStatus.DISK_ERROR
            entry = store.health()["tasks"]["group-commit"]
            assert entry["state"] == "failed" and "injected fault" in entry["last_error"]
            assert append(store, b"y").status is StoreStatus.DISK_ERROR
        [failure] = [r for r in caplog.records if "group-commit failed" in r.message]
        assert failure.exc_info is not None  # with its traceback
    run(body())


def test_commitlog_flush_service_failure_takes_the_store_offline(tmp_path, run, monkeypatch):
    fail_once(monkeypatch, FlushCommitLogService, "_flush")

    async def body():
        async with open_store(tmp_path, flush_interval_ms=10, flush_least_pages=0) as store:
            store.create_topic("t", 1)
            append(store, b"x")
            await until(lambda: store.offline_reason != "", "the store to go offline")
            assert store.health()["tasks"]["flush-commitlog"]["state"] == "failed"
    run(body())


@pytest.mark.parametrize("cls, step, task", [
    (FlushConsumeQueueService, "flush", "flush-consumequeue"),
    (CommitLog, "recheck_space", "retention"),
    (IndexBuilder, "_index_some_or_stall", "index-builder"),
])
def test_a_failing_background_task_is_logged_and_restarted(tmp_path, run, monkeypatch, caplog,
                                                           cls, step, task):
    calls = fail_once(monkeypatch, cls, step)

    async def body():
        async with open_store(tmp_path, consumequeue_flush_interval_ms=10,
                              retention_check_interval_ms=10) as store:
            store.create_topic("t", 1)
            entry = store.supervisor.tasks[task]
            await until(lambda: calls[0] >= 2 and entry.restarts == 1,
                        f"{task} to run again after its failure")
            assert "injected fault" in entry.last_error
            assert entry.state is supervision.TaskState.RUNNING
            assert append(store, b"x").status is StoreStatus.OK
            assert not store.offline_reason
        [failure] = [r for r in caplog.records if f"{task} failed; restarting" in r.message]
        assert failure.exc_info is not None
    run(body())


def test_a_failed_segment_preallocation_is_logged_and_redone(tmp_path, run, monkeypatch,
                                                              caplog):
    original = AllocateMappedFileService._create
    calls = [0]

    def create(self, path, start_offset, size):
        calls[0] += 1
        if calls[0] == 2:  # the first pre-allocation of a next segment
            raise RuntimeError("injected fault in the allocator")
        return original(self, path, start_offset, size)
    monkeypatch.setattr(AllocateMappedFileService, "_create", create)

    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 1)
            for n in range(40):  # 64 KiB segments: a few rolls
                assert append(store, b"%d" % n + b"x" * 4000).status is StoreStatus.OK
            assert len(store.commit_log.queue.files) >= 3
            entry = store.supervisor.tasks["allocate-mapped-file"]
            assert entry.restarts == 1 and "injected fault" in entry.last_error
            assert entry.state is supervision.TaskState.RUNNING
            assert len(values(store)) == 40
        [failure] = [r for r in caplog.records if "creating a CommitLog segment failed"
                     in r.message]
        assert failure.exc_info is not None
    run(body())


# ---- a failed append leaves no trace -----------------------------------------------------------

def poison_dispatch(monkeypatch: pytest.MonkeyPatch, count: int) -> None:
    """Dispatching a batch of ``count`` offsets writes its units, then raises MemoryError (as
    a huge record count did)."""
    original = Dispatcher.dispatch

    def dispatch(self, req, queue):
        original(self, req, queue)
        if req.offset_count == count:
            raise MemoryError
    monkeypatch.setattr(Dispatcher, "dispatch", dispatch)


def three(value: bytes):
    return batch([value, value, value])


def test_an_append_whose_dispatch_raises_leaves_no_trace(tmp_path, run, monkeypatch, caplog):
    poison_dispatch(monkeypatch, 3)

    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 1)
            append(store, b"a")
            end = store.commit_log.max_offset
            result = store.append("t", 0, three(b"poison"), offset_count=3,
                                  max_timestamp=1_000)
            assert result.status is StoreStatus.INTERNAL_ERROR
            assert "t-0" in result.error and "MemoryError" not in result.error
            assert store.commit_log.max_offset == end
            assert store.dispatcher.dispatched_offset == end
            assert store.log_end_offset("t", 0) == 1
            assert append(store, b"b").base_offset == 1
            assert not store.offline_reason
        async with open_store(tmp_path) as store:
            assert values(store) == [b"a", b"b"]
    run(body())


def test_an_entry_whose_replay_raises_cannot_prevent_a_start(tmp_path, run, monkeypatch,
                                                             caplog):
    poison_dispatch(monkeypatch, 3)
    # the undo fails too: the entry stays in the CommitLog and the store goes offline
    monkeypatch.setattr(CommitLog, "rollback",
                        lambda self, phy: (_ for _ in ()).throw(OSError(errno.EIO, "EIO")))

    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 1)
            append(store, b"a")
            poisoned = store.append("t", 0, three(b"poison"), offset_count=3,
                                    max_timestamp=1_000)
            assert poisoned.status is StoreStatus.INTERNAL_ERROR
            assert store.offline_reason.startswith("undoing the append to t-0 at offset 1")
        async with open_store(tmp_path) as store:  # replays the poisoned entry: it fails
            assert [r for r in caplog.records if r.levelno == logging.ERROR and
                    "replay: t-0 offset 1" in r.message]
            assert values(store) == [b"a"]
            monkeypatch.undo()
            assert append(store, b"b").base_offset == 1
            assert values(store) == [b"a", b"b"]
    run(body())
