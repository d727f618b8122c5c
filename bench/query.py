"""Query-by-key benchmark: ``python -m commitgate.bench.query``.

Writes ``--records`` records (default 10 million: 100-record batches, each record with its own
key, round robin over 8 partitions) into a store directly (no Kafka client: the write is not
what is measured), waits for the IndexBuilder to index every key, then times ``GET /v1/query
?topic=&key=`` on the admin API's query routes (aiohttp on this loop, the store in this
process) for keys drawn at random, and for keys never written. Prints the latency
percentiles; a figure, not a test. With ``--data-dir`` the records stay, and a later run with
the same ``--records`` and ``--batch`` times the queries again without writing them. The page cache holds what was just written: these are warm
lookups, as on a broker whose IndexFiles are in use.
"""
from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import tempfile
import time
from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from rich.console import Console
from rich.progress import Progress

from commitgate.bench.store import _index_settled
from commitgate.engine import MessageStore, StoreStatus
from commitgate.gateway import settings
from commitgate.gateway.admin import query
from commitgate.gateway.broker import Broker
from commitgate.protocol.record_batch import KafkaBodyFormat, build_batch

TOPIC = "keys"
VALUE = b"v" * 16
YIELD_EVERY = 64  # appends between turns of the loop for the store's flush tasks
INDEX_SETTLE_S = 1800.0


def key_of(n: int) -> bytes:
    return b"key-%09d" % n


async def fill(store: MessageStore, records: int, batch: int, partitions: int,
               console: Console) -> None:
    store.create_topic(TOPIC, partitions)
    batches = records // batch
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("writing", total=batches)
        for b in range(batches):
            body = memoryview(bytearray(build_batch(
                [(key_of(b * batch + i), VALUE, [], 0) for i in range(batch)])))
            result = store.append(TOPIC, b % partitions, body, offset_count=batch,
                                  max_timestamp=0)
            if result.status is not StoreStatus.OK:
                raise RuntimeError(f"append failed: {result.status} {result.error}")
            if b % YIELD_EVERY == 0:
                progress.update(task, completed=b)
                await asyncio.sleep(0)


async def _write(store: MessageStore, records: int, batch: int, partitions: int,
                 console: Console) -> None:
    started = time.perf_counter()
    await fill(store, records, batch, partitions, console)
    written = time.perf_counter()
    await _index_settled(store, INDEX_SETTLE_S)
    indexed = time.perf_counter()
    console.print(f"{records:,} records in {records // batch:,} batches over {partitions} "
                  f"partitions: written in {written - started:.1f} s, indexed "
                  f"{indexed - written:.1f} s later ({len(store.index.service.files)} "
                  f"IndexFiles)")


async def time_queries(client: TestClient, keys: list[bytes], expected: int
                       ) -> list[float]:
    """Milliseconds per GET /v1/query, checking each answer holds ``expected`` records."""
    took = []
    for key in keys:
        started = time.perf_counter()
        response = await client.get("/v1/query", params={"topic": TOPIC, "key": key.decode()})
        answer = await response.json()
        took.append((time.perf_counter() - started) * 1000)
        if response.status != 200 or len(answer["records"]) != expected:
            raise RuntimeError(f"query for {key!r}: {response.status} {answer}")
    return took


def summary(name: str, took: list[float]) -> str:
    ordered = sorted(took)
    p95 = ordered[int(len(ordered) * 0.95) - 1]
    return (f"{name}: {len(took)} queries, median {statistics.median(ordered):.2f} ms, "
            f"p95 {p95:.2f} ms, max {ordered[-1]:.2f} ms")


async def run(directory: Path, records: int, batch: int, partitions: int, queries: int,
              console: Console) -> None:
    config = settings.load(None, [f"log.dirs={directory}"])
    store = MessageStore(config.store, KafkaBodyFormat())
    await store.open()
    try:
        if store.topic(TOPIC) is None:
            await _write(store, records, batch, partitions, console)
        else:  # a --data-dir written by an earlier run with the same --records and --batch
            console.print(f"reusing the records in {directory}")
        app = web.Application()
        app.add_routes(query.routes(Broker(config, store)))
        async with TestClient(TestServer(app, host="127.0.0.1")) as client:
            drawn = random.Random(7).sample(range(records // batch * batch), queries)
            present = await time_queries(client, [key_of(n) for n in drawn], 1)
            absent = await time_queries(client, [key_of(records + n) for n in range(queries)], 0)
        console.print(summary("a key among them (1 record)", present))
        console.print(summary("a key never written (0 records)", absent))
    finally:
        await store.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--batch", type=int, default=100, help="records per batch")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--data-dir", type=Path, help="default: a temporary directory")
    args = parser.parse_args(argv)
    console = Console()
    if args.data_dir is not None:
        asyncio.run(run(args.data_dir, args.records, args.batch, args.partitions, args.queries,
                        console))
        return
    with tempfile.TemporaryDirectory(prefix="commitgate-query-") as tmp:
        asyncio.run(run(Path(tmp), args.records, args.batch, args.partitions, args.queries,
                        console))


if __name__ == "__main__":
    main()
