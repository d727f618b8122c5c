"""MessageStore facade: topics, append/read, offsets, timestamps, keys, restart, rebuild."""
from __future__ import annotations

import asyncio
import contextlib
import shutil

import pytest

from commitgate.engine import MessageStore, StoreConfig, StoreStatus, index_builder
from commitgate.protocol.record_batch import KafkaBodyFormat, decode_records
from tests.c_and_python import IMPLEMENTATIONS, c_helper
from tests.engine.conftest import SMALL, batch, open_store


@contextlib.asynccontextmanager
async def _reopened(tmp_path):
    """The store of ``tmp_path`` opened again, with the report of its recovery."""
    store = MessageStore(StoreConfig(data_dir=tmp_path / "data", **SMALL), KafkaBodyFormat())
    report = await store.open()
    try:
        yield store, report
    finally:
        await store.close()


async def _fill(tmp_path, *, partitions, batches):
    """Topic t with ``batches`` one-record batches b"0", b"1", ... round robin, then closed."""
    async with open_store(tmp_path) as store:
        store.create_topic("t", partitions)
        for i in range(batches):
            _append(store, "t", i % partitions, [b"%d" % i])


def _values(store, topic, partition):
    return [r.value for buf in store.read(topic, partition, 0, 1 << 30).buffers
            for r in decode_records(buf)]


def _append(store, topic, partition, values, **kw):
    body = batch(values, **kw)
    result = store.append(topic, partition, body, offset_count=len(values), max_timestamp=kw.get(
        "ts", 1_000) + len(values) - 1)
    assert result.status is StoreStatus.OK, result
    return result


def test_topic_admin_statuses(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            assert store.create_topic("t", 2).status is StoreStatus.OK
            assert store.create_topic("t", 2).status is StoreStatus.TOPIC_ALREADY_EXISTS
            assert store.create_topic("bad name", 1).status is StoreStatus.INVALID_TOPIC
            assert store.create_topic("z", 0).status is StoreStatus.INVALID_PARTITIONS
            assert store.create_topic("v", 3, validate_only=True).status is StoreStatus.OK
            assert store.topic("v") is None
            assert store.create_partitions("t", 2).status is StoreStatus.INVALID_PARTITIONS
            assert store.create_partitions("t", 5).status is StoreStatus.OK
            assert store.topic("t").partitions == 5
            assert store.alter_topic_configs("t", {"retention.ms": "5"}).status is StoreStatus.OK
            assert store.delete_topic("t").status is StoreStatus.OK
            assert store.delete_topic("t").status is StoreStatus.UNKNOWN_TOPIC_OR_PARTITION
    run(body())


def test_append_assigns_consecutive_offsets_and_writes_them_into_the_batch(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 1)
            first = _append(store, "t", 0, [b"a", b"b", b"c"])
            second = _append(store, "t", 0, [b"d"])
            assert (first.base_offset, second.base_offset) == (0, 3)
            read = store.read("t", 0, 0, 1 << 20)
            assert read.next_offset == 4 and read.log_end_offset == 4
            records = [r for buf in read.buffers for r in decode_records(buf)]
            assert [(r.offset, r.value) for r in records] == [
                (0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
    run(body())


def test_read_starting_inside_a_batch_returns_the_whole_batch(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 1)
            _append(store, "t", 0, [b"a", b"b", b"c"])
            _append(store, "t", 0, [b"d", b"e"])
            read = store.read("t", 0, 4, 1 << 20)
            assert [r.offset for r in decode_records(read.buffers[0])] == [3, 4]
            read = store.read("t", 0, 1, 1 << 20)
            assert len(read.buffers) == 2 and read.next_offset == 5
    run(body())


def test_max_bytes_limits_batches_but_min_one_returns_one(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 1)
            for _ in range(3):
                _append(store, "t", 0, [b"x" * 500])
            assert len(store.read("t", 0, 0, 10).buffers) == 1
            assert store.read("t", 0, 0, 10, min_one=False).buffers == []
            one_batch = len(store.read("t", 0, 0, 10).buffers[0])
            assert len(store.read("t", 0, 0, 2 * one_batch).buffers) == 2
    run(body())


def test_out_of_range_and_unknown_partitions(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 1)
            _append(store, "t", 0, [b"a"])
            assert store.read("t", 0, 2, 100).status is StoreStatus.OFFSET_OUT_OF_RANGE
            assert store.read("t", 0, 1, 100).buffers == []  # at the end: empty, not an error
            assert store.read("t", 1, 0, 100).status is StoreStatus.UNKNOWN_TOPIC_OR_PARTITION
            assert store.read("nope", 0, 0, 100).status is StoreStatus.UNKNOWN_TOPIC_OR_PARTITION
            result = store.append("t", 7, batch([b"a"]), offset_count=1, max_timestamp=0)
            assert result.status is StoreStatus.UNKNOWN_TOPIC_OR_PARTITION
    run(body())


def test_batch_larger_than_a_segment_is_refused(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 1)
            result = store.append("t", 0, batch([b"x" * 70_000]), offset_count=1, max_timestamp=0)
            assert result.status is StoreStatus.ENTRY_TOO_LARGE
            assert "t-0" in result.error
            assert store.log_end_offset("t", 0) == 0
    run(body())


def test_log_append_time_topic_rewrites_the_batch_timestamp(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 1, {"message.timestamp.type": "LogAppendTime"})
            result = _append(store, "t", 0, [b"a"], ts=5)
            assert result.log_append_time > 1_600_000_000_000
            body_read = store.read("t", 0, 0, 1 << 20).buffers[0]
            fmt = KafkaBodyFormat()
            assert fmt.stored_checksum(body_read) == fmt.computed_checksum(body_read)
            assert decode_records(body_read)[0].timestamp == result.log_append_time
    run(body())


def test_offset_for_timestamp_and_max_timestamp(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 1)
            _append(store, "t", 0, [b"a", b"b"], ts=100)  # 100, 101
            _append(store, "t", 0, [b"c", b"d"], ts=300)  # 300, 301
            _append(store, "t", 0, [b"e"], ts=200)  # a producer clock going back
            assert store.offset_for_timestamp("t", 0, 0) == (0, 100)
            assert store.offset_for_timestamp("t", 0, 101) == (1, 101)
            assert store.offset_for_timestamp("t", 0, 150) == (2, 300)
            assert store.offset_for_timestamp("t", 0, 302) is None
            assert store.max_timestamp_offset("t", 0) == (3, 301)
    run(body())


def test_delete_records_moves_the_log_start(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 1)
            for i in range(60):  # past one ConsumeQueue file (50 units)
                _append(store, "t", 0, [b"%d" % i])
            assert store.delete_records("t", 0, 55) == (StoreStatus.OK, 55)
            assert store.read("t", 0, 10, 100).status is StoreStatus.OFFSET_OUT_OF_RANGE
            assert store.read("t", 0, 55, 1 << 20).next_offset == 60
            assert store.delete_records("t", 0, 99)[0] is StoreStatus.OFFSET_OUT_OF_RANGE
            assert store.delete_records("t", 0, 3) == (StoreStatus.OK, 55)  # never backwards
            assert store.delete_records("t", 0, -1) == (StoreStatus.OK, 60)
    run(body())
    async def reopened():
        async with open_store(tmp_path) as store:
            assert store.log_start_offset("t", 0) == 60
    run(reopened())


def test_lookup_by_key_finds_the_batches_holding_it(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 2)
            store.create_topic("u", 1)
            for i in range(20):
                _append(store, "t", i % 2, [b"v"], keys=[b"key-%d" % (i % 5)])
            _append(store, "u", 0, [b"v"], keys=[b"key-1"])
            # The builder runs behind the dispatcher on its own thread; a lookup waits for it.
            hits = await store.lookup_key("t", b"key-1")
            assert hits == [(0, 8), (1, 5), (0, 3), (1, 0)]  # records 16, 11, 6, 1: newest first
            assert await store.lookup_key("t", b"key-1", max_count=1) == [hits[0]]
            assert await store.lookup_key("u", b"key-1") == [(0, 0)]
            assert await store.lookup_key("t", b"absent") == []
    run(body())


@pytest.mark.parametrize("walk", IMPLEMENTATIONS)
def test_lookup_finds_keys_across_walks_segment_rolls_and_big_batches(tmp_path, run, walk,
                                                                     monkeypatch):
    """The IndexBuilder follows the CommitLog (in C, or in Python without a compiler): many
    batches per walk, a segment roll between them, a big batch and a compressed one must all
    have their keys found."""
    if walk == "c":
        c_helper("engine._commit_log")
    else:
        monkeypatch.setattr(index_builder, "_follow", None)
    value = b"x" * 1000
    async def body():
        async with open_store(tmp_path, commitlog_segment_bytes=2 << 20) as store:
            assert (store.index._scanner is None) == (walk == "python")
            store.create_topic("t", 1)
            for i in range(120):  # ~30 KiB batches: ~3.5 MiB, so the CommitLog rolls
                records = [value] * (100 if i == 60 else 30)
                keys = [b"k%d" % i] + [None] * (len(records) - 1)
                _append(store, "t", 0, records, keys=keys,
                        compression="lz4" if i == 70 else "none")
            assert store.commit_log.queue.files[0].end_offset < store.commit_log.max_offset
            for i in range(120):
                assert len(await store.lookup_key("t", b"k%d" % i)) == 1, i
    run(body())


def test_reopen_keeps_offsets_and_data(tmp_path, run):
    async def first():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 3)
            for i in range(90):
                _append(store, "t", i % 3, [b"value-%d" % i] * 2)
    async def second():
        async with open_store(tmp_path) as store:
            assert [store.log_end_offset("t", p) for p in range(3)] == [60, 60, 60]
            result = _append(store, "t", 1, [b"after"])
            assert result.base_offset == 60
            assert _values(store, "t", 2) == \
                [b"value-%d" % i for i in range(2, 90, 3) for _ in range(2)]
    run(first())
    run(second())


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "unclean"])
@pytest.mark.parametrize("lost", ["the directory", "every file", "the last file"])
def test_lost_consumequeue_files_are_rebuilt_from_the_commitlog(tmp_path, run, clean, lost):
    run(_fill(tmp_path, partitions=2, batches=120))
    directory = tmp_path / "data" / "consumequeue" / "t" / "1"
    files = sorted(directory.iterdir())
    assert len(files) == 2  # 60 units, 50 a file
    if lost == "the directory":
        shutil.rmtree(directory)
    else:
        for path in files if lost == "every file" else files[-1:]:
            path.unlink()
    if not clean:
        (tmp_path / "data" / "abort").touch()

    async def second():
        async with _reopened(tmp_path) as (store, report):
            assert report.rebuilt_partitions == [("t", 1)]
            assert store.log_end_offset("t", 1) == 60
            assert _append(store, "t", 1, [b"next"]).base_offset == 60  # no offset given twice
            assert _values(store, "t", 1) == [b"%d" % i for i in range(1, 120, 2)] + [b"next"]
            assert store.log_end_offset("t", 0) == 60
    run(second())


def test_a_queue_missing_a_middle_file_is_rebuilt_at_a_clean_start(tmp_path, run):
    run(_fill(tmp_path, partitions=1, batches=120))
    files = sorted((tmp_path / "data" / "consumequeue" / "t" / "0").iterdir())
    assert len(files) == 3
    files[1].unlink()

    async def second():
        async with _reopened(tmp_path) as (store, report):
            assert report.rebuilt_partitions == [("t", 0)]
            assert _values(store, "t", 0) == [b"%d" % i for i in range(120)]
    run(second())


def test_queue_ends_follow_deleted_and_recreated_topics(tmp_path, run):
    async def first():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 1)
            _append(store, "t", 0, [b"a", b"b", b"c"])
            await store.consumequeue_flush_service.flush()
            assert store.queues.recorded_end("t", 0) == 3
            store.delete_topic("t")
            store.create_topic("t", 1)
            _append(store, "t", 0, [b"new"])
    run(first())

    async def second():  # the old topic's end (3) would make the new queue look cut short
        async with open_store(tmp_path) as store:
            assert store.queues.recorded_end("t", 0) == 1
            assert store.log_end_offset("t", 0) == 1
    run(second())


def test_recreated_topic_does_not_resurrect_old_records(tmp_path, run):
    async def first():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 1)
            _append(store, "t", 0, [b"old"])
            store.delete_topic("t")
            store.create_topic("t", 1)
            _append(store, "t", 0, [b"new"])
    run(first())
    shutil.rmtree(tmp_path / "data" / "consumequeue" / "t")  # force a replay of everything

    async def second():
        async with open_store(tmp_path) as store:
            assert _values(store, "t", 0) == [b"new"]
    run(second())


def test_a_second_process_cannot_open_the_same_directory(tmp_path, run):
    import subprocess
    import sys

    async def body():
        async with open_store(tmp_path):
            code = ("import asyncio, sys; from commitgate.engine import MessageStore, StoreConfig, StoreLocked;"
                    "from commitgate.protocol.record_batch import KafkaBodyFormat;"
                    f"s = MessageStore(StoreConfig(data_dir={str(tmp_path / 'data')!r}), "
                    "KafkaBodyFormat())\ntry: asyncio.run(s.open())\n"
                    "except StoreLocked as e: print('LOCKED', e); sys.exit(3)")
            proc = await asyncio.to_thread(subprocess.run, [sys.executable, "-c", code],
                                           capture_output=True, text=True, timeout=60,
                                           check=False)
            assert proc.returncode == 3, proc.stderr
            assert "in use by another process" in proc.stdout
    run(body())


def test_dispatch_listeners_hear_every_append(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 1)
            heard = []
            store.add_dispatch_listener(lambda req: heard.append((req.partition, req.queue_offset)))
            _append(store, "t", 0, [b"a", b"b"])
            _append(store, "t", 0, [b"c"])
            assert heard == [(0, 0), (0, 2)]
    run(body())


@pytest.mark.parametrize("compression", ["gzip", "snappy", "lz4", "zstd"])
def test_compressed_batches_are_stored_as_sent(tmp_path, run, compression):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 1)
            sent = batch([b"v1", b"v2"], keys=[b"k1", b"k2"], compression=compression)
            original = bytes(sent[8:])  # all but the base offset, which the store assigns
            store.append("t", 0, sent, offset_count=2, max_timestamp=1001)
            stored = store.read("t", 0, 0, 1 << 20).buffers[0]
            assert bytes(stored[8:]) == original
            assert [r.value for r in decode_records(stored)] == [b"v1", b"v2"]
    run(body())
