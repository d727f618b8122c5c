"""Topic creations, growths and deletions off the event loop: ordering, visibility, the
partition limit, and the topic table's saves from both threads landing in the loop's order."""
from __future__ import annotations

import asyncio
import json
import threading

from commitgate.engine import StoreStatus
from commitgate.engine.topic_table import TopicRecord, TopicTable
from tests.engine.conftest import batch, open_store


def _on_disk(store) -> dict[str, int]:
    data = json.loads(store.table.path.read_text())
    return {t["name"]: t["partitions"] for t in data["topics"]}


def test_racing_creations_give_one_topic(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            results = await asyncio.gather(*(store.create_topic_off_loop("t", 50)
                                             for _ in range(3)))
            assert sorted(r.status.value for r in results) == \
                ["OK", "TOPIC_ALREADY_EXISTS", "TOPIC_ALREADY_EXISTS"]
            assert store.topic("t").partitions == 50 and _on_disk(store) == {"t": 50}
    run(body())


def test_a_topic_is_seen_only_once_on_disk(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            release = threading.Event()
            store.table.run_later(release.wait)  # holds the table's thread
            creating = asyncio.ensure_future(store.create_topic_off_loop("t", 2))
            await _until(lambda: "t" in store.table.pending)
            assert store.topic("t") is None
            appended = store.append("t", 1, batch([b"v"]), offset_count=1, max_timestamp=1)
            assert appended.status is StoreStatus.UNKNOWN_TOPIC_OR_PARTITION
            # a save meanwhile (another change) writes the creation too: none drops it
            store.create_topic("other", 1)
            assert _on_disk(store) == {"t": 2, "other": 1}
            assert store.create_topic("t", 3).status is StoreStatus.TOPIC_ALREADY_EXISTS
            release.set()
            assert (await creating).status is StoreStatus.OK
            assert store.append("t", 1, batch([b"v"]), offset_count=1,
                                max_timestamp=1).status is StoreStatus.OK
    run(body())


def test_growth_keeps_the_record_and_the_limit_counts_everything(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            assert (await store.create_topic_off_loop("t", 3, max_partitions=10)).status \
                is StoreStatus.OK
            record = store.topic("t")
            over = await store.create_partitions_off_loop("t", 11, max_partitions=10)
            assert over.status is StoreStatus.PARTITION_LIMIT
            assert "max.broker.partitions=10" in over.error and "11" in over.error
            grown = await store.create_partitions_off_loop("t", 10, max_partitions=10)
            assert grown.status is StoreStatus.OK
            assert store.topic("t") is record and record.partitions == 10
            assert store.create_topic("u", 1, validate_only=True,
                                      max_partitions=10).status is StoreStatus.PARTITION_LIMIT
            assert (await store.delete_topic_off_loop("t")).status is StoreStatus.OK
            assert (await store.create_topic_off_loop("u", 10, max_partitions=10)).status \
                is StoreStatus.OK
        async with open_store(tmp_path) as store:
            assert _on_disk(store) == {"u": 10} and store.topic("t") is None
    run(body())


def test_a_deleted_topics_files_go_off_the_loop_and_after_a_stop(tmp_path, run):
    async def body():
        async with open_store(tmp_path) as store:
            store.create_topic("t", 4)
            store.append("t", 3, batch([b"v"]), offset_count=1, max_timestamp=1)
            release = threading.Event()
            store.table.run_later(release.wait)
            deleting = asyncio.ensure_future(store.delete_topic_off_loop("t"))
            await _until(lambda: store.topic("t") is None)  # gone for requests at once
            assert not deleting.done()  # while its table write waits
            release.set()
            assert (await deleting).status is StoreStatus.OK
            queues = store.paths.consumequeue
            aside = [p for p in queues.iterdir() if p.name.startswith("~deleted~")]
            await _table_thread_done(store)
            assert not (queues / "t").exists() and aside
            assert not any(p.exists() for p in aside)
        # a removal a stop came first to is done at the next start
        (queues / "~deleted~t~leftover" / "0").mkdir(parents=True)
        async with open_store(tmp_path) as store:
            await _table_thread_done(store)
            assert not (queues / "~deleted~t~leftover").exists()
    run(body())


async def _until(condition) -> None:
    for _ in range(1000):  # turns of the loop, not time
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition not reached")


async def _table_thread_done(store) -> None:
    """Wait (boundedly) until the jobs given to the table's thread so far are done."""
    done = threading.Event()
    store.table.run_later(done.set)
    assert await asyncio.to_thread(done.wait, 60)


def test_an_older_snapshot_never_overwrites_a_newer_one(tmp_path):
    table = TopicTable(tmp_path / "topics.json")
    table.topics["a"] = TopicRecord("a", 1)
    older = table._snapshot()
    table.topics["b"] = TopicRecord("b", 2)
    table.save()
    table._write(*older)  # a thread's write that lost the race
    loaded = TopicTable(tmp_path / "topics.json")
    loaded.load()
    assert sorted(loaded.topics) == ["a", "b"]
