"""The admin API's query, topic and group routes (gateway/admin/query.py, topics.py) over HTTP
(aiohttp's test server) on a real store and broker state in this process; the CLI tests drive
the same routes through the broker subprocess's admin listener."""
from __future__ import annotations

import asyncio
import contextlib
import time

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from commitgate.engine import MessageStore, StoreStatus
from commitgate.gateway import settings
from commitgate.gateway.admin import query, topics
from commitgate.gateway.broker import Broker
from commitgate.launcher import BrokerProcess
from commitgate.protocol.record_batch import KafkaBodyFormat, build_batch


@contextlib.asynccontextmanager
async def _client(tmp_path):
    # the suite's small files (tests/conftest.py): a default store reserves 1.4 GB a test
    small = [f"{key}={value}" for key, value in BrokerProcess.default_overrides.items()]
    config = settings.load(None, [f"log.dirs={tmp_path / 'data'}", *small])
    store = MessageStore(config.store, KafkaBodyFormat())
    await store.open()
    broker = Broker(config, store)
    app = web.Application()
    app.add_routes(query.routes(broker) + topics.routes(broker))
    client = TestClient(TestServer(app, host="127.0.0.1"))
    await client.start_server()
    try:
        yield broker, client
    finally:
        await client.close()
        await store.close()


def _produce(broker, topic, partition, records):
    """One batch of (key, value, headers) records with timestamps 1000, 1001, ..."""
    body = memoryview(bytearray(build_batch(
        [(k, v, h, 1_000 + i) for i, (k, v, h) in enumerate(records)])))
    result = broker.store.append(topic, partition, body, offset_count=len(records),
                                 max_timestamp=1_000 + len(records) - 1)
    assert result.status is StoreStatus.OK
    return result


def test_query_by_key_offset_and_time(tmp_path):
    async def body():
        async with _client(tmp_path) as (broker, client):
            broker.store.create_topic("t", 2)
            _produce(broker, "t", 0, [(b"a", b"1", []), (b"b", b"2", [("h", b"x")])])
            _produce(broker, "t", 1, [(b"b", b"\xff\x00", []), (None, b"4", [])])
            _produce(broker, "t", 0, [(b"b", b"5", [])])
            found = await (await client.get("/v1/query", params={"topic": "t", "key": "b"})).json()
            assert [(r["partition"], r["offset"], r["value"]) for r in found["records"]] == \
                [(0, 2, "5"), (1, 0, "/wA="), (0, 1, "2")]
            assert found["records"][1]["base64"] == ["value"]
            assert found["records"][2]["headers"] == [["h", "x"]]
            assert found["entries_read"] <= found["index_hits"] == 3
            limited = await client.get("/v1/query", params={"topic": "t", "key": "b", "max": "1"})
            assert [r["offset"] for r in (await limited.json())["records"]] == [2]
            later = {"topic": "t", "key": "b", "since": str(int(time.time() * 1000) + 60_000)}
            assert (await (await client.get("/v1/query", params=later)).json())["records"] == []
            none = await client.get("/v1/query", params={"topic": "t", "key": "never"})
            assert (await none.json())["records"] == []

            at = await client.get("/v1/query", params={"topic": "t", "partition": "0",
                                                       "offset": "1"})
            assert [(r["offset"], r["key"]) for r in (await at.json())["records"]] == [(1, "b")]
            by_time = await client.get("/v1/query", params={"topic": "t", "partition": "1",
                                                            "time": "1001"})
            assert [r["offset"] for r in (await by_time.json())["records"]] == [1]
            after = await client.get("/v1/query", params={"topic": "t", "partition": "1",
                                                           "time": "5000"})
            assert (await after.json())["records"] == []
    asyncio.run(body())


@pytest.mark.parametrize("params, status, words", [
    ({"key": "k"}, 400, "topic is required"),
    ({"topic": "t", "key": "k", "max": "x"}, 400, "max must be an integer"),
    ({"topic": "t", "key": "k", "max": "0"}, 400, "max must be between"),
    ({"topic": "t", "key": "k", "since": "yesterday"}, 400, "'yesterday' is not a time"),
    ({"topic": "t", "key": "k", "partition": "0"}, 400, "no partition"),
    ({"topic": "t", "partition": "0"}, 400, "either offset or time"),
    ({"topic": "t", "partition": "0", "offset": "1", "time": "1"}, 400, "either offset or time"),
    ({"topic": "t", "partition": "-1", "offset": "1"}, 400, "must not be negative"),
    ({"topic": "t", "key": "k", "bogus": "1"}, 400, "unknown parameters: bogus"),
    ({"topic": "nope", "key": "k"}, 404, "unknown topic nope"),
    ({"topic": "t", "partition": "5", "offset": "0"}, 404, "unknown partition t-5"),
    ({"topic": "t", "partition": "0", "offset": "7"}, 404, "no record at offset 7 of t-0"),
])
def test_bad_query_parameters_get_json_errors(tmp_path, params, status, words):
    async def body():
        async with _client(tmp_path) as (broker, client):
            broker.store.create_topic("t", 1)
            _produce(broker, "t", 0, [(b"k", b"v", [])])
            response = await client.get("/v1/query", params=params)
            assert response.status == status
            assert words in (await response.json())["error"]
    asyncio.run(body())


def test_topics_and_groups(tmp_path):
    async def body():
        async with _client(tmp_path) as (broker, client):
            broker.store.create_topic("t", 2, {"retention.ms": "60000"})
            _produce(broker, "t", 1, [(b"k", b"v" * 100, [])] * 3)
            listed = await (await client.get("/v1/topics")).json()
            assert {"name": "t", "partitions": 2, "internal": False} .items() <= \
                listed["topics"][0].items()
            described = await (await client.get("/v1/topics/t")).json()
            parts = described["partitions"]
            assert [(p["log_start_offset"], p["log_end_offset"]) for p in parts] == \
                [(0, 0), (0, 3)]
            assert parts[0]["size_bytes"] == 0 < parts[1]["size_bytes"] == described["size_bytes"]
            configs = {c["name"]: c for c in described["configs"]}
            assert configs["retention.ms"] == {"name": "retention.ms", "value": "60000",
                                               "source": "TOPIC_CONFIG"}
            assert configs["cleanup.policy"]["source"] == "DEFAULT_CONFIG"
            missing = await client.get("/v1/topics/nope")
            assert missing.status == 404 and "nope" in (await missing.json())["error"]
            assert (await (await client.get("/v1/groups")).json()) == {"groups": []}
    asyncio.run(body())
