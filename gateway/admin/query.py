"""``/v1/query``: records by key through the IndexFiles, or one record by offset or time.

- ``?topic=T&key=K[&since=&until=][&max=N]``: the records of T whose key is K (UTF-8 text),
  newest first, found through the IndexFiles (``engine.key_query``): only the CommitLog
  entries the index points to are read. ``since``/``until`` bound the time the broker stored
  the record (the IndexFile's clock; the same as the record timestamp under LogAppendTime and
  for producers whose clock agrees with the broker's).
- ``?topic=T&partition=P&offset=O``: the record at O (404 outside the log).
- ``?topic=T&partition=P&time=TIME``: the first record with a timestamp at or after TIME (as
  ListOffsets finds it); none is an empty list.

Times are epoch milliseconds, ISO 8601 (without a zone: local time, as Kafka's tools read
them) or relative to now (``-15m``, ``-2h``, ``-1d``). Bytes are UTF-8 text when they decode,
else base64 (the record's ``base64`` list names those fields). Key lookups and record decoding
run on a thread: the IndexFiles and CommitLog are mappings whose pages may come from disk, and
batches may be compressed.
"""
from __future__ import annotations

import asyncio
import base64
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from aiohttp import web

from commitgate.engine.key_query import KeyBatch
from commitgate.engine.status import StoreStatus
from commitgate.gateway.broker import Broker
from commitgate.protocol.record_batch import Record, decode_records

DEFAULT_MAX = 100
MAX_RECORDS = 10_000
FOREVER = 2**62
ONE_BATCH = 1  # read() returns at least the batch holding the offset
RELATIVE = re.compile(r"^-(\d+)(ms|s|m|h|d)$")
UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_time(text: str) -> int:
    """Epoch ms from ms digits, ISO 8601, or ``-<n><ms|s|m|h|d>`` before now."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    relative = RELATIVE.match(text)
    if relative:
        return int(time.time() * 1000) - int(relative[1]) * UNIT_MS[relative[2]]
    try:
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise ValueError(f"{text!r} is not a time: give epoch milliseconds, ISO 8601 "
                         f"(2024-05-01T12:00:00) or a time before now (-15m, -2h, -1d)") from None


def record_json(partition: int, offset: int, timestamp: int, key: bytes | None,
                value: bytes | None, headers: Sequence[tuple[str, bytes | None]]) -> dict:
    """One record as JSON (``query`` answers and ``commitgate consume --format json``)."""
    binary: list[str] = []
    out = {"partition": partition, "offset": offset, "timestamp": timestamp,
           "key": _text(key, "key", binary), "value": _text(value, "value", binary),
           "headers": [[name, _text(v, f"headers[{i}]", binary)]
                       for i, (name, v) in enumerate(headers)]}
    if binary:
        out["base64"] = binary
    return out


def _text(data: bytes | None, field: str, binary: list[str]) -> str | None:
    if data is None:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        binary.append(field)
        return base64.b64encode(data).decode()


@dataclass
class Query:
    topic: str
    key: bytes | None = None
    since: int | None = None  # stored at or after (ms)
    until: int | None = None
    max: int = DEFAULT_MAX
    partition: int | None = None
    offset: int | None = None
    time: int | None = None


def parse_query(params: Mapping[str, str]) -> Query:
    """The query the parameters ask for; ValueError says what is wrong with them."""
    unknown = set(params) - {"topic", "key", "since", "until", "max", "partition", "offset",
                             "time"}
    if unknown:
        raise ValueError(f"unknown parameters: {', '.join(sorted(unknown))}")
    topic = params.get("topic", "")
    if not topic:
        raise ValueError("topic is required")
    query = Query(topic)
    if "key" in params:
        if {"partition", "offset", "time"} & set(params):
            raise ValueError("key looks in every partition: no partition, offset or time")
        query.key = params["key"].encode()
        query.since = parse_time(params["since"]) if "since" in params else None
        query.until = parse_time(params["until"]) if "until" in params else None
        query.max = _integer(params, "max", DEFAULT_MAX)
        if not 1 <= query.max <= MAX_RECORDS:
            raise ValueError(f"max must be between 1 and {MAX_RECORDS}")
        return query
    if "partition" not in params or ("offset" in params) == ("time" in params):
        raise ValueError("give key, or partition with either offset or time")
    if {"since", "until", "max"} & set(params):
        raise ValueError("since, until and max go with key")
    query.partition = _integer(params, "partition", 0)
    if "offset" in params:
        query.offset = _integer(params, "offset", 0)
    else:
        query.time = parse_time(params["time"])
    return query


def _integer(params: Mapping[str, str], name: str, default: int) -> int:
    text = params.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name} must be an integer, not {text!r}") from None
    if value < 0:
        raise ValueError(f"{name} must not be negative")
    return value


def error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


class QueryError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def routes(broker: Broker) -> list[web.RouteDef]:
    async def query(request: web.Request) -> web.Response:
        try:
            return web.json_response(await answer(broker, parse_query(request.query)))
        except ValueError as exc:
            return error(400, str(exc))
        except QueryError as exc:
            return error(exc.status, str(exc))

    return [web.get("/v1/query", query)]


async def answer(broker: Broker, query: Query) -> dict:
    record = broker.topic(query.topic)
    if record is None:
        raise QueryError(404, f"unknown topic {query.topic}")
    if query.key is not None:
        return await by_key(broker, query)
    if query.partition >= record.partitions:
        raise QueryError(404, f"unknown partition {query.topic}-{query.partition} (the topic "
                              f"has {record.partitions})")
    if query.offset is not None:
        return await by_offset(broker, query.topic, query.partition, query.offset)
    return await by_time(broker, query.topic, query.partition, query.time)


async def by_key(broker: Broker, query: Query) -> dict:
    since = 0 if query.since is None else query.since
    until = FOREVER if query.until is None else query.until
    found = await broker.store.key_batches(query.topic, query.key, since, until, query.max)
    topic = broker.topic(query.topic)
    # as a read_committed reader sees them: records of aborted transactions left out
    batches = [b for b in found.batches
               if topic is None or not broker.aborted_batch(topic, b.partition, b.body)]
    records = await asyncio.to_thread(_keyed_records, batches, query.key, query.max)
    return {"topic": query.topic, "key": query.key.decode(), "since": query.since,
            "until": query.until, "records": records, "index_hits": found.index_hits,
            "entries_read": found.entries_read}


def _keyed_records(batches: list[KeyBatch], key: bytes, limit: int) -> list[dict]:
    """The records holding ``key``, newest first (the batches come newest first)."""
    out: list[dict] = []
    for batch in batches:
        out += [record_json(batch.partition, r.offset, r.timestamp, r.key, r.value, r.headers)
                | {"stored": batch.store_timestamp}
                for r in reversed(decode_records(batch.body))
                if r.key == key and r.offset >= batch.log_start]
        if len(out) >= limit:
            break
    return out[:limit]


async def by_offset(broker: Broker, topic: str, partition: int, offset: int) -> dict:
    read = broker.store.read(topic, partition, offset, ONE_BATCH)
    at = await asyncio.to_thread(_first_at, read.buffers, offset) if read.buffers else None
    if read.status is not StoreStatus.OK or at is None:
        raise QueryError(404, f"no record at offset {offset} of {topic}-{partition} (log start "
                              f"{read.log_start_offset}, end {read.log_end_offset})")
    return {"topic": topic, "records": [record_json(partition, at.offset, at.timestamp, at.key,
                                                    at.value, at.headers)]}


def _first_at(buffers: list[memoryview], offset: int) -> Record | None:
    """The record at ``offset``, or the next one when compaction removed it."""
    return next((r for buf in buffers for r in decode_records(buf) if r.offset >= offset),
                None)


async def by_time(broker: Broker, topic: str, partition: int, timestamp: int) -> dict:
    found = None
    for search in broker.store.timestamp_searches(topic, partition, timestamp):
        found = await asyncio.to_thread(search.run)
        if found is not None:
            break
    if found is None:
        return {"topic": topic, "records": []}
    return await by_offset(broker, topic, partition, found[0])
