"""``commitgate selfcheck``: the store end to end in a temporary directory, in a few seconds."""
from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path

from rich.console import Console

from commitgate.engine import MessageStore, StoreConfig, StoreStatus
from commitgate.protocol.record_batch import KafkaBodyFormat, build_batch, decode_records

log = logging.getLogger(__name__)
PARTITIONS = 4
BATCHES = 200


class SelfCheckFailed(Exception):
    pass


def _check(condition: bool, what: str) -> None:
    if not condition:
        raise SelfCheckFailed(what)


async def _write(config: StoreConfig) -> dict[int, list[bytes]]:
    store = MessageStore(config, KafkaBodyFormat())
    await store.open()
    store.create_topic("selfcheck", PARTITIONS)
    sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    now = int(time.time() * 1000)
    for i in range(BATCHES):
        values = [b"value-%d-%d" % (i, j) for j in range(1 + i % 5)]
        body = memoryview(bytearray(build_batch([(b"k%d" % i, v, [], now) for v in values])))
        result = store.append("selfcheck", i % PARTITIONS, body, offset_count=len(values),
                              max_timestamp=now)
        _check(result.status is StoreStatus.OK, f"append {i}: {result}")
        _check(await store.wait_durable(result.phy_end) is StoreStatus.OK, "durability wait")
        sent[i % PARTITIONS].extend(values)
    await store.close()
    return sent


async def _verify(config: StoreConfig, sent: dict[int, list[bytes]]) -> int:
    store = MessageStore(config, KafkaBodyFormat())
    report = await store.open()
    _check(report.clean, "the restart after a clean close was not clean")
    total = 0
    for partition, values in sent.items():
        read = store.read("selfcheck", partition, 0, 1 << 30)
        got = [r.value for buf in read.buffers for r in decode_records(buf)]
        _check(got == values, f"partition {partition}: read back differs")
        total += len(got)
    await store.close()
    return total


async def run_selfcheck() -> None:
    console = Console()
    with tempfile.TemporaryDirectory(prefix="commitgate-selfcheck-") as tmp:
        config = StoreConfig(data_dir=Path(tmp), commitlog_segment_bytes=1 << 20,
                             flush_disk_type="SYNC_FLUSH", index_hash_slots=1024,
                             index_max_entries=4096)
        started = time.perf_counter()
        sent = await _write(config)
        total = await _verify(config, sent)
        console.print(f"[green]selfcheck passed[/]: {BATCHES} batches, {total} records in "
                      f"{PARTITIONS} partitions appended with SYNC_FLUSH, read back identical "
                      f"after a restart ({time.perf_counter() - started:.2f}s)")
