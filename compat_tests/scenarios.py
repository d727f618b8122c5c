"""The scenarios, written once: each composes the contract's operations (contract.py) and checks
what the client reports, and what the broker stored (read over the raw wire), with ``expect``.
A scenario fails with its first unmet expectation; its ``feature`` lets a client declare it
not applicable (clients.py)."""
from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kafka.partitioner.default import murmur2

from commitgate.compat_tests.contract import Record
from commitgate.compat_tests.session import POLL_MS, Session, eventually
from commitgate.compat_tests.stored import stored_batches
from commitgate.protocol.record_batch import CODECS, BatchHeader

BASE_TS = 1_000_000  # record timestamps: far in the past, never what a clock would give
LARGE_BYTES = 5 * 1024 * 1024
LARGE_TOPIC_MAX = 8 * 1024 * 1024
MIDDLE = 25  # an offset inside the codec scenario's batch
LOG_APPEND_TIME_FLAG = 0x08  # RecordBatch attributes: timestamp type
GROUP_PARTITIONS = 4
GROUP_COMMITTED_AT = 3  # of each partition's 10 records: a lone member's first poll reads more
REBALANCE_ROUNDS = 60  # alternating polls of two members until both hold partitions
SHORT_POLL_MS = 500
COMMITTED_RECORDS = 10
COMMITTED_AT = 6  # committed explicitly: neither 2 (asked for) nor 10 (all a poll may give)
IDEMPOTENT_PARTITIONS = 2
CONSUMER_PROTOCOL = "consumer"  # KIP-848's group.protocol
REGEX_RECORDS = 5

CODEC_RECORDS = tuple(Record(b"key-%d" % i, bytes([i % 251]) * (i * 37 % 2000),
                             (("h", b"%d" % i), ("i", b"x")), BASE_TS + i) for i in range(50))
HEADER_RECORDS = (
    Record(b"h1", b"two values, one name", (("dup", b"1"), ("dup", b"2"), ("z", b"last"))),
    Record(b"h2", b"binary and empty", (("bin", bytes(range(256))), ("empty", b""))),
    Record(None, b"no headers"),
)
NULL_RECORDS = (Record(None, b"v"), Record(b"k", None), Record(b"k2", b"", (("empty", b""),)))
LARGE_VALUE = bytes(range(256)) * (LARGE_BYTES // 256)


class Unmet(AssertionError):
    """An expectation of a scenario that the client or broker did not meet."""


def expect(condition: bool, what: str) -> None:
    if not condition:
        raise Unmet(what)


@dataclass(frozen=True)
class Scenario:
    name: str
    run: Callable[[Session], None]
    feature: str  # what a client may lack: "produce", "admin", "groups", "transactions", ...
    summary: str


def murmur2_partition(key: bytes, partitions: int) -> int:
    """Kafka's default partitioner for keyed records (Java, kafkajs, kafka-python, aiokafka)."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def same_records(got: list[Record], sent: Sequence[Record], timestamps: bool, what: str) -> None:
    expect(len(got) == len(sent), f"{what}: read {len(got)} records of {len(sent)}")
    for i, (read, wrote) in enumerate(zip(got, sent, strict=True)):
        expect(read.content() == wrote.content(),
               f"{what}: record {i} differs: read {_short(read)} sent {_short(wrote)}")
        if timestamps and wrote.timestamp is not None:
            expect(read.timestamp == wrote.timestamp,
                   f"{what}: record {i} timestamp {read.timestamp} != {wrote.timestamp}")


def _short(record: Record) -> str:
    def cut(data: bytes | None) -> str:
        return "null" if data is None else repr(data[:16]) + ("..." if len(data) > 16 else "")
    return f"key={cut(record.key)} value={cut(record.value)} headers={len(record.headers)}"


def _offsets(records: list[Record]) -> list[int]:
    return [r.offset for r in records]


# ---- produce and consume -------------------------------------------------------------------------


def metadata(s: Session) -> None:
    topic = s.topic("metadata", 3)
    found = s.call("metadata", topic=topic)
    expect(found["partitions"] == [0, 1, 2], f"partitions {found['partitions']} != [0, 1, 2]")
    expect(found["brokers"] >= 1, "no broker listed")


def codec_scenario(codec: str) -> Callable[[Session], None]:
    def run(s: Session) -> None:
        topic = s.topic(f"codec-{codec}", 1)
        s.produce(topic, CODEC_RECORDS, compression=codec, linger_ms=100)
        same_records(s.read(topic, 0, "earliest", len(CODEC_RECORDS)), CODEC_RECORDS,
                      s.client.sets_timestamps, "from offset 0")
        middle = s.read(topic, 0, MIDDLE, len(CODEC_RECORDS) - MIDDLE)
        expect(_offsets(middle) == list(range(MIDDLE, len(CODEC_RECORDS))),
               f"from inside the batch (offset {MIDDLE}): offsets {_offsets(middle)[:5]}...")
        batches = stored_batches(s.bootstrap, topic)
        biggest = max(batches, key=lambda b: b.size)  # librdkafka leaves a small batch
        # uncompressed when compressing would not shrink it
        expect(biggest.codec == CODECS[codec],
               f"stored codec {biggest.codec}, sent as {codec} ({CODECS[codec]})")
    return run


def headers(s: Session) -> None:
    topic = s.topic("headers", 1)
    s.produce(topic, HEADER_RECORDS)
    same_records(s.read(topic, 0, "earliest", len(HEADER_RECORDS)), HEADER_RECORDS, False,
                  "headers")


def nulls(s: Session) -> None:
    topic = s.topic("nulls", 1)
    s.produce(topic, NULL_RECORDS)
    same_records(s.read(topic, 0, "earliest", len(NULL_RECORDS)), NULL_RECORDS, False, "nulls")


def partitioner(s: Session) -> None:
    """Keyed records land where murmur2 puts them: the same partition from every client."""
    topic = s.topic("partitioner", 4)
    records = tuple(Record(b"k-%d" % i, b"v-%d" % i) for i in range(40))
    sent = s.produce(topic, records, partitioner="murmur2")
    for record, placed in zip(records, sent, strict=True):
        want = murmur2_partition(record.key, 4)
        expect(placed["partition"] == want,
               f"key {record.key!r} went to partition {placed['partition']}, murmur2 says {want}")
    for partition in range(4):
        wanted = [r for r, p in zip(records, sent, strict=True) if p["partition"] == partition]
        same_records(s.read(topic, partition, "earliest", len(wanted)), wanted, False,
                      f"partition {partition}")


def large(s: Session) -> None:
    topic = s.topic("large", 1, {"max.message.bytes": str(LARGE_TOPIC_MAX)})
    s.produce(topic, [Record(None, LARGE_VALUE)], max_request_bytes=LARGE_TOPIC_MAX)
    [got] = s.read(topic, 0, "earliest", 1) or [Record(None, b"")]
    expect(got.value is not None and len(got.value) == LARGE_BYTES,
           f"read {len(got.value or b'')} bytes of {LARGE_BYTES}")
    expect(hashlib.sha256(got.value).digest() == hashlib.sha256(LARGE_VALUE).digest(),
           "the 5 MiB value came back different")


def too_large(s: Session) -> None:
    topic = s.topic("too-large", 1)  # the broker's default limit (1 MiB)
    refused = s.fails(lambda: s.produce(topic, [Record(None, LARGE_VALUE)],
                                        max_request_bytes=LARGE_TOPIC_MAX))
    expect(refused is not None, "a 5 MiB record on a 1 MiB topic was accepted")
    expect(stored_batches(s.bootstrap, topic) == [], "the refused record was stored")


def seek_timestamp(s: Session) -> None:
    topic = s.topic("seek-timestamp", 1)
    records = [Record(None, b"t-%d" % i, timestamp=BASE_TS + i * 1000) for i in range(8)]
    s.harness_produce(topic, records)  # kcat cannot set timestamps: the seek is what is tested
    s.open("c", topic, [0], start={"timestamp": BASE_TS + 4500})
    got = s.poll("c", 3)
    expect(_offsets(got) == [5, 6, 7], f"after seeking to {BASE_TS + 4500}: {_offsets(got)}")
    expect([r.timestamp for r in got] == [BASE_TS + i * 1000 for i in (5, 6, 7)],
           f"timestamps {[r.timestamp for r in got]}")


def from_earliest(s: Session) -> None:
    topic = s.topic("earliest", 1)
    s.produce(topic, [Record(None, b"e-%d" % i) for i in range(5)])
    positions = s.open("c", topic, [0], start="earliest")
    expect(positions == {"0": 0}, f"earliest position {positions}")
    expect(_offsets(s.poll("c", 5)) == list(range(5)), "earliest: offsets 0-4")


def from_latest(s: Session) -> None:
    topic = s.topic("latest", 1)
    s.produce(topic, [Record(None, b"old-%d" % i) for i in range(5)])
    positions = s.open("c", topic, [0], start="latest")
    expect(positions == {"0": 5}, f"latest position {positions}, want 5")
    s.produce(topic, [Record(None, b"new-%d" % i) for i in range(3)])
    got = s.poll("c", 3)
    expect(_offsets(got) == [5, 6, 7], f"latest: offsets {_offsets(got)}, want [5, 6, 7]")


def from_committed(s: Session) -> None:
    """An offset committed explicitly in the middle, away from the first consumer's position
    (a poll may return more records than asked), is where the group's next consumer starts.
    (The group scenario checks a subscribing member's resume the same way.)"""
    topic = s.topic("committed", 1)
    group = s.name("committed-group")
    s.produce(topic, [Record(None, b"c-%d" % i) for i in range(COMMITTED_RECORDS)])
    s.open("first", topic, [0], group=group, start="earliest")
    expect(_offsets(s.poll("first", 2))[:2] == [0, 1], "first consumer: offsets 0 and 1")
    committed = s.call("commit", name="first", offsets={"0": COMMITTED_AT})["committed"]
    expect(committed == {"0": COMMITTED_AT}, f"committed {committed}, asked {COMMITTED_AT}")
    s.close("first")
    want = list(range(COMMITTED_AT, COMMITTED_RECORDS))
    positions = s.open("second", topic, [0], group=group, start="committed")
    expect(positions == {"0": COMMITTED_AT}, f"resumed at {positions}, committed {COMMITTED_AT}")
    got = _offsets(s.poll("second", len(want)))
    expect(got == want, f"assigned at the committed offset: read {got}, want {want}")


def group(s: Session) -> None:
    """Join, rebalance to a second member, commit, and resume from the commit."""
    topic = s.topic("group", GROUP_PARTITIONS)
    name = s.name("group")
    records = [Record(b"g-%d" % i, b"v-%d" % i, partition=i % GROUP_PARTITIONS)
                for i in range(40)]
    sent = s.produce(topic, records)
    s.open("a", topic, None, group=name)
    started = time.monotonic()
    first = s.poll_raw("a", 20, POLL_MS)
    expect(first["assignment"] == list(range(GROUP_PARTITIONS)),
           f"the lone member holds {first['assignment']} after reading "
           f"{len(first['records'])} records in {time.monotonic() - started:.1f} s")
    middle = {str(p): GROUP_COMMITTED_AT for p in range(GROUP_PARTITIONS)}
    committed = s.call("commit", name="a", offsets=middle)["committed"]
    expect(committed == middle, f"committed {committed}, asked {middle}")
    s.open("b", topic, None, group=name)
    a_parts, b_parts = _rebalance(s)
    expect(sorted(a_parts + b_parts) == list(range(GROUP_PARTITIONS)) and a_parts and b_parts,
           f"after the second member joined: {a_parts} and {b_parts}")
    s.close("a")
    s.close("b")
    want = sorted((p["partition"], p["offset"]) for p in sent
                  if p["offset"] >= GROUP_COMMITTED_AT)
    s.open("c", topic, None, group=name)
    got = sorted((r.partition, r.offset) for r in s.poll("c", len(want)))
    expect(got == want, f"resumed from offset {GROUP_COMMITTED_AT} of each partition: read "
                        f"{len(got)} records from {_firsts(got)}, want {len(want)}")


def _firsts(read: list[tuple[int, int]]) -> dict[int, int]:
    """The first offset read of each partition."""
    return {p: min(o for q, o in read if q == p) for p in sorted({p for p, _ in read})}


def _rebalance(s: Session) -> tuple[list[int], list[int]]:
    a_parts: list[int] = []
    b_parts: list[int] = []
    for _ in range(REBALANCE_ROUNDS):
        b_parts = s.poll_raw("b", 1, SHORT_POLL_MS)["assignment"]
        a_parts = s.poll_raw("a", 1, SHORT_POLL_MS)["assignment"]
        if a_parts and b_parts and len(a_parts) + len(b_parts) == GROUP_PARTITIONS:
            break
    return sorted(a_parts), sorted(b_parts)


def consumer_protocol(s: Session) -> None:
    """KIP-848 (``group.protocol=consumer``): two members split a topic and each commits
    mid-partition; when one leaves the other takes every partition; a member joining the group
    once both left starts at the committed offsets."""
    topic = s.topic("cgp", GROUP_PARTITIONS)
    name = s.name("cgp")
    s.produce(topic, [Record(b"c-%d" % i, b"v-%d" % i, partition=i % GROUP_PARTITIONS)
                      for i in range(40)])
    s.open("a", topic, None, group=name, protocol=CONSUMER_PROTOCOL)
    s.open("b", topic, None, group=name, protocol=CONSUMER_PROTOCOL)
    a_parts, b_parts = _rebalance(s)
    expect(sorted(a_parts + b_parts) == list(range(GROUP_PARTITIONS)) and a_parts and b_parts,
           f"two members of the consumer protocol hold {a_parts} and {b_parts}")
    for member, parts in (("a", a_parts), ("b", b_parts)):
        asked = {str(p): GROUP_COMMITTED_AT for p in parts}
        committed = s.call("commit", name=member, offsets=asked)["committed"]
        expect(committed == asked, f"{member} committed {committed}, asked {asked}")
    s.close("b")
    held, _ = _hold_all(s, "a", read_each=False)
    expect(held == list(range(GROUP_PARTITIONS)), f"after the other left, a holds {held}")
    s.close("a")
    # a member may read a partition it gets back from its own position rather than the commit
    # (@platformatic/kafka 1.35 does): a new member is what must start at the committed offsets
    s.open("c", topic, None, group=name, protocol=CONSUMER_PROTOCOL)
    held, firsts = _hold_all(s, "c", read_each=True)
    expect(firsts == {p: GROUP_COMMITTED_AT for p in range(GROUP_PARTITIONS)},
           f"a new member holding {held} read from {firsts}, committed {GROUP_COMMITTED_AT}")


def _hold_all(s: Session, name: str, read_each: bool) -> tuple[list[int], dict[int, int]]:
    """Poll until the member holds every partition (and, with ``read_each``, read from each):
    what it holds, and the first offset it read of each partition."""
    read: list[tuple[int, int]] = []
    held: list[int] = []
    for _ in range(REBALANCE_ROUNDS):
        polled = s.poll_raw(name, 40, SHORT_POLL_MS)
        held = polled["assignment"]
        read += [(r["partition"], r["offset"]) for r in polled["records"]]
        if held == list(range(GROUP_PARTITIONS)) and (
                not read_each or len(_firsts(read)) == GROUP_PARTITIONS):
            break
    return held, _firsts(read)


def consumer_regex(s: Session) -> None:
    """KIP-848 v1's broker-side regex: a member subscribed with a regular expression reads the
    topic it matches, then a topic created after it subscribed, with no change of its own."""
    first, later = s.name("rx-1"), s.name("rx-2")
    s.topic("rx-1", 1)
    s.produce(first, [Record(None, b"first-%d" % i, partition=0) for i in range(REGEX_RECORDS)])
    regex = "^" + s.name("rx-").replace(".", "\\.") + ".*"
    s.open("r", regex, None, group=s.name("rx-group"), protocol=CONSUMER_PROTOCOL)
    want = {b"first-%d" % i for i in range(REGEX_RECORDS)}
    got = _values_until(s, "r", want)
    expect(got == want, f"{regex} read {sorted(got)} of {first}")
    s.topic("rx-2", 1)
    s.produce(later, [Record(None, b"later-%d" % i, partition=0) for i in range(REGEX_RECORDS)])
    want = {b"later-%d" % i for i in range(REGEX_RECORDS)}
    got = _values_until(s, "r", want)
    expect(got == want, f"{regex} read {sorted(got)} of {later}, created after subscribing")


def _values_until(s: Session, name: str, want: set[bytes]) -> set[bytes]:
    got: set[bytes] = set()
    for _ in range(REBALANCE_ROUNDS):
        got |= {r.value for r in s.poll(name, len(want), SHORT_POLL_MS)} & want
        if got == want:
            break
    return got


def idempotent(s: Session) -> None:
    """Every stored batch, however the client split the records, carries the one producer id
    the broker assigned, epoch 0 and the next sequence of its partition."""
    topic = s.topic("idempotent", IDEMPOTENT_PARTITIONS)
    records = [Record(b"id-%d" % i, b"value-%d" % i) for i in range(100)]  # keys spread them
    sent = s.produce(topic, records, idempotent=True, batch_bytes=512, linger_ms=5)
    ids: set[int] = set()
    for partition in range(IDEMPOTENT_PARTITIONS):
        mine = [r for r, placed in zip(records, sent, strict=True)
                if placed["partition"] == partition]
        same_records(s.read(topic, partition, "earliest", len(mine)), mine, False,
                     f"idempotent, partition {partition}")
        batches = stored_batches(s.bootstrap, topic, partition)
        ids |= {b.producer_id for b in batches}
        _check_sequences(batches, partition, len(mine))
    expect(len(ids) == 1 and min(ids) >= 0, f"producer ids {ids}: want one, assigned")


def _check_sequences(batches: list[BatchHeader], partition: int, records: int) -> None:
    sequence = 0
    for batch in batches:
        where = f"partition {partition}, batch at {batch.base_offset}"
        expect(batch.producer_epoch == 0, f"{where}: epoch {batch.producer_epoch}, want 0")
        expect(batch.base_sequence == sequence,
               f"{where}: sequence {batch.base_sequence}, want {sequence}")
        sequence += batch.record_count
    expect(sequence == records, f"partition {partition}: {sequence} records stored, {records} sent")


def acks(s: Session) -> None:
    topic = s.topic("acks", 1)
    sent: list[Record] = []
    for level in ("0", "1", "all"):
        records = [Record(b"acks-" + level.encode(), b"%s-%d" % (level.encode(), i))
                   for i in range(10)]
        s.produce(topic, records, acks=level, idempotent=level == "all")
        sent += records
    same_records(s.read(topic, 0, "earliest", 30), sent, False, "acks 0, 1, all")


def auto_create(s: Session) -> None:
    topic = s.name("auto-created")  # nobody creates it: the producer's metadata request does
    records = [Record(None, b"auto-%d" % i) for i in range(3)]
    s.produce(topic, records)
    same_records(s.read(topic, 0, "earliest", 3), records, False, "auto-created topic")


def log_append_time(s: Session) -> None:
    topic = s.topic("log-append-time", 1, {"message.timestamp.type": "LogAppendTime"})
    records = [Record(None, b"lat-%d" % i, timestamp=BASE_TS + i) for i in range(5)]
    s.produce(topic, records, compression="gzip", linger_ms=100)
    stamps = [r.timestamp for r in s.read(topic, 0, "earliest", 5)]
    expect(len(stamps) == 5 and stamps[0] > BASE_TS + 5,
           f"timestamps {stamps}: want the broker's append time")
    batches = stored_batches(s.bootstrap, topic)
    expect(all(b.attributes & LOG_APPEND_TIME_FLAG for b in batches), "batch not LogAppendTime")
    expect(all(stamps[i] == _batch_max(batches, i) for i in range(5)),
           "a record does not carry its batch's append time")


def _batch_max(batches: list, offset: int) -> int:
    return next(b.max_timestamp for b in batches
                if b.base_offset <= offset < b.base_offset + b.offset_count)


def transactions(s: Session) -> None:
    topic = s.topic("transactions", 1)
    committed = [Record(None, b"committed-%d" % i) for i in range(3)]
    aborted = [Record(None, b"aborted-%d" % i) for i in range(3)]
    s.produce(topic, committed, transactional_id=s.name("tx"))
    s.produce(topic, aborted, transactional_id=s.name("tx"), abort=True)
    after = [Record(None, b"after")]
    s.produce(topic, after)
    s.open("c", topic, [0], start="earliest", read_committed=True)
    got = s.poll("c", 4)
    same_records(got[:4], committed + after, False, "read_committed")


# ---- admin ----------------------------------------------------------------------------------------


def admin_topics(s: Session) -> None:
    topic = s.name("admin-topics")
    s.call("create_topic", topic=topic, partitions=2, configs={"retention.ms": "3600000"})
    expect(topic in s.call("list_topics")["topics"], "created topic not listed")
    partitions = s.call("metadata", topic=topic)["partitions"]
    expect(partitions == [0, 1], f"described partitions {partitions}")
    s.call("delete_topic", topic=topic)
    expect(topic not in s.call("list_topics")["topics"], "deleted topic still listed")


def admin_configs(s: Session) -> None:
    topic = s.topic("admin-configs", 1, {"retention.ms": "3600000"})
    configs = s.call("describe_configs", topic=topic)["configs"]
    expect(configs.get("retention.ms") == "3600000", f"retention.ms {configs.get('retention.ms')}")
    s.call("alter_config", topic=topic, name="retention.ms", value="7200000")
    configs = eventually(lambda: s.call("describe_configs", topic=topic)["configs"],
                         lambda c: c.get("retention.ms") == "7200000")
    expect(configs.get("retention.ms") == "7200000",
           f"after altering: retention.ms {configs.get('retention.ms')}")


def create_partitions(s: Session) -> None:
    topic = s.topic("create-partitions", 1)
    s.call("create_partitions", topic=topic, total=3)
    partitions = eventually(lambda: s.call("metadata", topic=topic)["partitions"],
                            lambda found: found == [0, 1, 2])
    expect(partitions == [0, 1, 2], f"partitions {partitions} after growing to 3")


def delete_records(s: Session) -> None:
    topic = s.topic("delete-records", 1)
    s.harness_produce(topic, [Record(None, b"d-%d" % i) for i in range(10)])
    s.call("delete_records", topic=topic, partition=0, offset=4)
    positions = s.open("c", topic, [0], start="earliest")
    expect(positions == {"0": 4}, f"earliest after deleting below 4: {positions}")


def _codecs() -> list[Scenario]:
    return [Scenario(f"codec-{c}", codec_scenario(c), "produce" if c == "none" else c,
                     f"50 records with headers, {c}, read from 0 and from inside the batch")
            for c in ("none", "gzip", "snappy", "lz4", "zstd")]


SCENARIOS: list[Scenario] = [
    Scenario("metadata", metadata, "produce", "ApiVersions and metadata of a 3-partition topic"),
    *_codecs(),
    Scenario("headers", headers, "headers", "repeated, binary and empty headers"),
    Scenario("nulls", nulls, "produce", "null key, null value, empty value"),
    Scenario("partitioner", partitioner, "produce", "40 keys on murmur2's partitions"),
    Scenario("large-record", large, "produce", "a 5 MiB record on a topic allowing 8 MiB"),
    Scenario("too-large", too_large, "produce", "a 5 MiB record on a 1 MiB topic is refused"),
    Scenario("seek-timestamp", seek_timestamp, "produce", "seek to a timestamp"),
    Scenario("from-earliest", from_earliest, "produce", "consume from the earliest offset"),
    Scenario("from-latest", from_latest, "produce", "consume from the latest offset"),
    Scenario("from-committed", from_committed, "groups",
             "an offset committed in the middle is where the group's next consumer starts"),
    Scenario("group", group, "groups",
             "join, rebalance to two members, commit mid-partition, a new member resumes there"),
    Scenario("consumer-protocol", consumer_protocol, "consumer-protocol",
             "group.protocol=consumer: two members split, commit, one takes over the other's"),
    Scenario("consumer-regex", consumer_regex, "consumer-regex",
             "group.protocol=consumer regex subscription picks up a topic created later"),
    Scenario("acks", acks, "produce", "acks 0, 1 and all"),
    Scenario("idempotent", idempotent, "produce",
             "every stored batch: one producer id, epoch 0, gapless sequences per partition"),
    Scenario("auto-create", auto_create, "produce", "produce to a topic nobody created"),
    Scenario("log-append-time", log_append_time, "log-append-time",
             "the broker's append time"),
    Scenario("admin-topics", admin_topics, "admin", "create, list, describe, delete a topic"),
    Scenario("admin-configs", admin_configs, "admin", "describe and alter a topic config"),
    Scenario("create-partitions", create_partitions, "admin", "grow a topic to 3 partitions"),
    Scenario("delete-records", delete_records, "admin", "delete records below an offset"),
    Scenario("transactions", transactions, "transactions",
             "committed and aborted transactions, read_committed consumer"),
]


def scenario_names() -> list[str]:
    return [s.name for s in SCENARIOS]

