"""Shared helpers for store tests: real files in a temp dir, real Kafka batches."""
from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from commitgate.engine import MessageStore, StoreConfig
from commitgate.protocol.record_batch import KafkaBodyFormat, build_batch

SMALL = {"commitlog_segment_bytes": 64 * 1024, "consumequeue_entries_per_file": 50,
         "index_hash_slots": 64, "index_max_entries": 512}


def batch(values: list[bytes], *, keys: list[bytes | None] | None = None, ts: int = 1_000,
          compression: str = "none") -> memoryview:
    """A writable Kafka batch with one record per value, timestamps ts, ts+1, ..."""
    keys = keys or [None] * len(values)
    records = [(k, v, [], ts + i) for i, (k, v) in enumerate(zip(keys, values))]
    return memoryview(bytearray(build_batch(records, compression=compression)))


@contextlib.asynccontextmanager
async def open_store(tmp_path, **overrides) -> AsyncIterator[MessageStore]:
    config = StoreConfig(data_dir=tmp_path / "data", **{**SMALL, **overrides})
    store = MessageStore(config, KafkaBodyFormat())
    await store.open()
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
def run():
    """Run a coroutine to completion (the store needs a running loop)."""
    return lambda coro: asyncio.run(coro)
