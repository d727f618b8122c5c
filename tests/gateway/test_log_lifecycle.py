"""The log's lifecycle end to end (docs/architecture.md, "The log's lifecycle"), with real broker
subprocesses and real clients:

- retention frees disk whatever long-lived partitions keep: a ``retention.ms=-1`` topic and a
  group's committed offsets sit in the oldest CommitLog segment while a short-retention topic
  streams many segments through; the segments on disk stay within the design's bound
  (garbage factor x live + 3 segments), the long-lived data is relocated, never lost, and
  survives a restart;
- a full disk (the broker on a small tmpfs): produce fails with KAFKA_STORAGE_ERROR, not a
  time-out; every acknowledged record stays readable, reads go on while writes are refused,
  and writes are accepted again by themselves once a deleted topic frees space;
- a volume that cannot hold MIN_SEGMENTS_ON_VOLUME segments refuses to start and names
  ``commitlog.segment.bytes``.

The tmpfs tests run the broker inside ``unshare --mount --propagation private`` (its own mount
namespace, the host's network: clients reach it on 127.0.0.1) so the host sees no mount and the
mount goes with the broker. They need root / CAP_SYS_ADMIN and fail, rather than skip, without
it, as tests/engine/test_disk_full.py does: a skipped disk-full test reads like a passed one.
"""
from __future__ import annotations

import contextlib
import shlex
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.errors import KafkaStorageError
from kafka.structs import OffsetAndMetadata

from commitgate.launcher import BrokerProcess

SEGMENT = 256 * 1024  # commitlog.segment.bytes of these brokers
GARBAGE_FACTOR = 2  # log.cleaner.relocate.garbage.factor, the default, also set explicitly
RETENTION_CHECK_MS = 200
WAIT_S = 60.0  # a bound on each wait, never a measurement
CLIENT_TIMEOUT_S = 30.0
MOUNT_FAILED = 97  # exit status of the namespace's shell when the tmpfs cannot be mounted
# Small IndexFiles: the suite default (~4 MB, reserved with fallocate) would not fit a tmpfs.
SMALL_INDEX = {"index.hash.slots": "64", "index.max.entries": "1024"}

# Generous CommitLog footprint of one record: in a batch of its own (61-byte RecordBatch
# header, record framing), in an entry of its own (88-byte prefix, topic and properties).
ENTRY_OVERHEAD = 320

# ---- test 1: retention ----
FOREVER, SHORT, GROUP = "forever", "short", "keeper"
FOREVER_RECORDS, FOREVER_VALUE = 200, 1000
COMMITS = (50, 100, 150)  # the group commits these offsets of "forever", in turn
SHORT_RETENTION_MS = 2000
SHORT_VALUE, STEP_RECORDS, STEPS = 4096, 20, 64  # 80 KiB a step, 5 MiB = 20 segments
# Pacing (not synchronisation): a step starts at least this long after the one before, so the
# retention window holds a few steps and the bound means something while the stream runs.
STEP_EVERY_S = 0.35
# Offsets commits and group metadata records of "keeper": a handful of entries of a few
# hundred bytes; generously more.
OFFSETS_ALLOWANCE = 64 * 1024
# The cleaner's last pass may be this much older than the moment the bound is checked.
CLEANER_LAG_S = 1.0

# ---- test 2: full disk ----
FULL_TMPFS_MIB = 6
FILL_VALUE = 16_000
FILL_STEP = 8  # records per flush
FILL_MAX_RECORDS = 3 * FULL_TMPFS_MIB * 1024 * 1024 // FILL_VALUE  # 3 x the tmpfs: a bound
# A record whose entry needs a new CommitLog segment whenever the last one holds anything:
# while writes are refused it must be refused, once space is back it must be accepted.
BIG_VALUE = SEGMENT - 8 * 1024


def value_of(topic: str, seq: int, size: int) -> bytes:
    head = f"{topic}-{seq:06d}-".encode()
    return (head * (size // len(head) + 1))[:size]


def wait_until(condition: Callable[[], bool], what: Callable[[], str] | str,
               timeout: float = WAIT_S, every: float = 0.05) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    for _ in range(int(timeout / every) + 1000):  # bounded in count as well as in time
        if condition():
            return
        if time.monotonic() >= deadline:
            break
        time.sleep(every)
    pytest.fail(f"gave up waiting for {what() if callable(what) else what}")


# ---- clients ---------------------------------------------------------------------------------

def admin_of(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topics(bootstrap: str, topics: list[NewTopic]) -> None:
    admin = admin_of(bootstrap)  # referenced until the results are in: its end cancels them
    for future in admin.create_topics(topics).values():
        future.result(CLIENT_TIMEOUT_S)


class Acks:
    """Delivery reports of a confluent-kafka producer: what was acknowledged, what failed."""

    def __init__(self) -> None:
        self.acked: list[tuple[int, bytes]] = []  # (offset, value)
        self.errors: list[KafkaError] = []

    def __call__(self, err: KafkaError | None, msg) -> None:
        if err is None:
            self.acked.append((msg.offset(), msg.value()))
        else:
            self.errors.append(err)


def producer_of(bootstrap: str, **extra) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **extra})


def flush(producer: Producer) -> None:
    left = producer.flush(CLIENT_TIMEOUT_S)
    assert left == 0, f"{left} records still undelivered after {CLIENT_TIMEOUT_S}s"


def read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes]]:
    """Every record of partition 0 from the log start to the high watermark, with a fresh
    consumer of a group of its own that commits nothing."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4()}",
                         "enable.auto.commit": False, "auto.offset.reset": "error"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0),
                                                   timeout=CLIENT_TIMEOUT_S)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        records: list[tuple[int, bytes | None, bytes]] = []
        deadline = time.monotonic() + WAIT_S
        while high > 0 and (not records or records[-1][0] < high - 1) and \
                time.monotonic() < deadline:
            for msg in consumer.consume(500, 1.0):
                assert msg.error() is None, f"reading {topic}: {msg.error()}"
                records.append((msg.offset(), msg.key(), msg.value()))
        assert low == 0, f"{topic} starts at {low}, expected 0"
        last = records[-1][0] if records else -1
        assert last == high - 1, f"read {topic} up to {last} within {WAIT_S}s, its end is {high}"
        return records
    finally:
        consumer.close()


# ---- brokers ----------------------------------------------------------------------------------

class TmpfsBroker(BrokerProcess):
    """A broker whose data directory is a tmpfs of ``size`` mounted at ``data_dir`` in a mount
    namespace of its own: the shell mounts it, then execs the broker (same pid, so SIGTERM and
    SIGKILL reach the broker). ``omit`` drops suite-wide defaults (to get the product's)."""

    def __init__(self, data_dir: Path, size: str, overrides: dict[str, str], log_path: Path,
                 omit: tuple[str, ...] = ()) -> None:
        super().__init__(data_dir, overrides, log_path=log_path)
        self.size = size
        self.omit = omit

    def command(self) -> list[str]:
        inner = super().command()
        for key in self.omit:
            at = next(i for i, arg in enumerate(inner) if arg.startswith(f"{key}="))
            del inner[at - 1 : at + 1]
        script = (f"mount -t tmpfs -o size={self.size} tmpfs {shlex.quote(str(self.data_dir))} "
                  f"|| exit {MOUNT_FAILED}; exec {shlex.join(inner)}")
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script]


def require_private_tmpfs(tmp_path: Path) -> None:
    """Fail (not skip) when a tmpfs cannot be mounted in a private mount namespace."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        pytest.fail("the tmpfs tests need util-linux `unshare` and `mount`; not installed")
    probe = tmp_path / "mount-probe"
    probe.mkdir()
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                           f"mount -t tmpfs -o size=1m tmpfs {shlex.quote(str(probe))}"],
                          capture_output=True, text=True, timeout=30, check=False)
    if proc.returncode != 0:
        pytest.fail("the tmpfs tests must mount a tmpfs in a private mount namespace "
                    "(unshare --mount, mount -t tmpfs: root or CAP_SYS_ADMIN), and that was "
                    f"refused here (rc {proc.returncode}):\n{proc.stderr}")


def commitlog_files(data_dir: Path) -> dict[str, int]:
    """Name -> size of every file in the CommitLog directory (pre-allocations included)."""
    files = {}
    for path in (data_dir / "commitlog").iterdir():
        with contextlib.suppress(FileNotFoundError):  # deleted by the cleaner meanwhile
            files[path.name] = path.stat().st_size
    return files


# ---- 1. retention frees disk whatever long-lived topics keep -----------------------------------

class ShortStream:
    """The steps produced to "short": when each was acknowledged and how many bytes it holds."""

    def __init__(self) -> None:
        self.steps: list[tuple[float, int]] = []  # (wall time after its acks, bytes)

    def live_bytes(self, now: float) -> int:
        """Bytes of "short" the cleaner may still count live: every step not older than the
        retention, plus the cleaner's lag (record timestamps are at most the ack time)."""
        cutoff = now - SHORT_RETENTION_MS / 1000 - CLEANER_LAG_S
        return sum(size for acked_at, size in self.steps if acked_at >= cutoff)


FOREVER_LIVE = FOREVER_RECORDS * (FOREVER_VALUE + 16 + ENTRY_OVERHEAD)


def segment_bound(short: ShortStream) -> int:
    """The design's bound on the CommitLog's disk: factor x live + 3 segments (the one being
    written, the pre-allocated next one, the cleaner's reserve), live counted generously."""
    live = FOREVER_LIVE + OFFSETS_ALLOWANCE + short.live_bytes(time.time())
    return GARBAGE_FACTOR * live + 3 * SEGMENT


def within_bound(data_dir: Path, short: ShortStream, looks: list[tuple[int, int]]) -> bool:
    """Whether the CommitLog's files are within the bound now; records (used, bound)."""
    used, bound = sum(commitlog_files(data_dir).values()), segment_bound(short)
    looks.append((used, bound))
    return used <= bound


def bound_report(data_dir: Path, short: ShortStream, broker: BrokerProcess) -> str:
    files = commitlog_files(data_dir)
    return (f"the CommitLog within {segment_bound(short)} bytes: {len(files)} files, "
            f"{sum(files.values())} bytes: {sorted(files)}\nbroker log:\n{broker.log_tail(40)}")


def produce_forever(bootstrap: str) -> list[tuple[int, bytes, bytes]]:
    acks = Acks()
    producer = producer_of(bootstrap)
    for seq in range(FOREVER_RECORDS):
        producer.produce(FOREVER, key=b"k%06d" % seq, value=value_of(FOREVER, seq, FOREVER_VALUE),
                         partition=0, on_delivery=acks)
    flush(producer)
    assert not acks.errors, acks.errors
    assert [offset for offset, _ in acks.acked] == list(range(FOREVER_RECORDS))
    return [(seq, b"k%06d" % seq, value_of(FOREVER, seq, FOREVER_VALUE))
            for seq in range(FOREVER_RECORDS)]


def consume_and_commit(bootstrap: str) -> None:
    """Group "keeper" reads "forever" and commits COMMITS in turn (kafka-python)."""
    consumer = KafkaConsumer(FOREVER, bootstrap_servers=bootstrap, group_id=GROUP,
                             enable_auto_commit=False, auto_offset_reset="earliest")
    tp = KafkaTopicPartition(FOREVER, 0)
    try:
        seen: list[int] = []
        deadline = time.monotonic() + WAIT_S
        while len(seen) < FOREVER_RECORDS and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                seen += [record.offset for record in records]
        assert seen == list(range(FOREVER_RECORDS)), f"group read {len(seen)} records"
        for offset in COMMITS:
            consumer.commit({tp: OffsetAndMetadata(offset, f"at {offset}", -1)})
    finally:
        consumer.close()


def committed_offsets(bootstrap: str) -> dict[int, int]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = admin.list_group_offsets({GROUP: None})[GROUP]
    finally:
        admin.close()
    return {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == FOREVER}


def resumed_offsets(bootstrap: str) -> list[int]:
    """What a member of "keeper" reads first: the records from the committed offset on."""
    consumer = KafkaConsumer(FOREVER, bootstrap_servers=bootstrap, group_id=GROUP,
                             enable_auto_commit=False, auto_offset_reset="none")
    try:
        seen: list[int] = []
        deadline = time.monotonic() + WAIT_S
        while (not seen or seen[-1] < FOREVER_RECORDS - 1) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                seen += [record.offset for record in records]
        return seen
    finally:
        consumer.close()


def check_long_lived(bootstrap: str, expected: list[tuple[int, bytes, bytes]], stage: str
                     ) -> None:
    assert read_all(bootstrap, FOREVER) == expected, f"{stage}: {FOREVER} is not whole"
    assert committed_offsets(bootstrap) == {0: COMMITS[-1]}, f"{stage}: committed offsets"
    assert resumed_offsets(bootstrap) == list(range(COMMITS[-1], FOREVER_RECORDS)), \
        f"{stage}: the group did not resume at its committed offset"


@pytest.mark.timeout(240)
def test_retention_frees_disk_while_long_lived_topics_and_offsets_stay_whole(tmp_path):
    data_dir = tmp_path / "data"
    broker = BrokerProcess(data_dir, {
        "commitlog.segment.bytes": str(SEGMENT),
        "log.retention.check.interval.ms": str(RETENTION_CHECK_MS),
        "log.cleaner.relocate.garbage.factor": str(GARBAGE_FACTOR),
        "group.initial.rebalance.delay.ms": "0"})
    short = ShortStream()
    looks: list[tuple[int, int]] = []  # (CommitLog bytes, bound) at every look
    broker.start()
    try:
        bootstrap = broker.bootstrap
        create_topics(bootstrap, [
            NewTopic(FOREVER, 1, 1, config={"retention.ms": "-1"}),
            NewTopic(SHORT, 1, 1, config={"retention.ms": str(SHORT_RETENTION_MS)})])
        forever = produce_forever(bootstrap)
        consume_and_commit(bootstrap)
        assert committed_offsets(bootstrap) == {0: COMMITS[-1]}

        producer = producer_of(bootstrap)
        acks = Acks()
        step_started = -STEP_EVERY_S
        for step in range(STEPS):
            ahead = step_started + STEP_EVERY_S - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)  # pacing (STEP_EVERY_S), not a wait for anything
            step_started = time.monotonic()
            for i in range(STEP_RECORDS):
                seq = step * STEP_RECORDS + i
                producer.produce(SHORT, value=value_of(SHORT, seq, SHORT_VALUE), partition=0,
                                 on_delivery=acks)
            flush(producer)
            assert not acks.errors, acks.errors
            short.steps.append((time.time(), STEP_RECORDS * (SHORT_VALUE + ENTRY_OVERHEAD)))
            wait_until(lambda: within_bound(data_dir, short, looks),
                       lambda step=step: f"step {step}: " + bound_report(data_dir, short, broker))
        assert len(acks.acked) == STEPS * STEP_RECORDS
        streamed = STEPS * STEP_RECORDS * SHORT_VALUE
        assert streamed >= 10 * SEGMENT  # the log went 10 times past what it may keep
        # The pacing keeps the bound below what streamed through: else it would say nothing.
        assert max(bound for _, bound in looks) < streamed, \
            f"the bound reached {max(bound for _, bound in looks)} of {streamed} bytes streamed"

        # Every "short" record expires; the cleaner frees all but the long-lived data.
        wait_until(lambda: short.live_bytes(time.time()) == 0 and
                   within_bound(data_dir, short, looks),
                   lambda: "the end: " + bound_report(data_dir, short, broker))
        final_bound = segment_bound(short)
        assert final_bound <= 6 * SEGMENT  # tight: 20 segments went through
        segments = [int(name) for name in commitlog_files(data_dir) if name.isdigit()]
        # The first segment held every "forever" record and the commits: it is gone, so the
        # cleaner relocated them (retention alone never frees it).
        assert min(segments) >= SEGMENT, bound_report(data_dir, short, broker)
        check_long_lived(bootstrap, forever, "after the stream")

        code = broker.stop()
        assert code == 0, f"broker exited with {code} on SIGTERM:\n{broker.log_tail()}"
        broker.start()  # same data directory and port
        check_long_lived(bootstrap, forever, "after a restart")
        wait_until(lambda: within_bound(data_dir, short, looks),
                   lambda: "after a restart: " + bound_report(data_dir, short, broker))
        code = broker.stop()
        assert code == 0, f"broker exited with {code} on SIGTERM:\n{broker.log_tail()}"
    finally:
        broker.kill()


# ---- 2. a full disk ---------------------------------------------------------------------------

@pytest.mark.timeout(180)
def test_full_disk_refuses_writes_keeps_acked_records_and_heals_when_a_topic_is_deleted(
        tmp_path):
    require_private_tmpfs(tmp_path)
    mount_point = tmp_path / "tmpfs"
    mount_point.mkdir()
    broker = TmpfsBroker(mount_point, f"{FULL_TMPFS_MIB}m", {
        "commitlog.segment.bytes": str(SEGMENT),
        "log.retention.check.interval.ms": str(RETENTION_CHECK_MS), **SMALL_INDEX},
        log_path=tmp_path / "broker.log")
    # No retries: the storage error must reach the application, not a time-out.
    strict = {"retries": 0, "request.timeout.ms": 10_000, "message.timeout.ms": 20_000}
    kafka_producer = None
    broker.start()
    try:
        bootstrap = broker.bootstrap
        create_topics(bootstrap, [NewTopic("fill", 1, 1)])
        producer, acks = producer_of(bootstrap, **strict), Acks()
        for seq in range(FILL_MAX_RECORDS):
            producer.produce("fill", value=value_of("fill", seq, FILL_VALUE), partition=0,
                             on_delivery=acks)
            if seq % FILL_STEP == FILL_STEP - 1:
                flush(producer)
                if acks.errors:
                    break
        flush(producer)
        codes = {err.code() for err in acks.errors}
        assert codes == {KafkaError.KAFKA_STORAGE_ERROR}, (
            f"after {len(acks.acked)} acknowledged records the producer got "
            f"{[str(err) for err in acks.errors[:5]]} (wanted KAFKA_STORAGE_ERROR only)\n"
            f"{broker.log_tail()}")
        assert len(acks.acked) * FILL_VALUE > 3 * SEGMENT, "the disk filled too early"
        log_text = broker.log_path.read_text(errors="replace")
        assert any("ERROR" in line and "fill-0" in line for line in log_text.splitlines()), \
            f"no ERROR log line names the refused partition:\n{broker.log_tail()}"

        def refused(topic: str) -> bool:
            big = Acks()
            producer.produce(topic, value=value_of(topic, 0, BIG_VALUE), partition=0,
                             on_delivery=big)
            flush(producer)
            if big.errors:
                assert [err.code() for err in big.errors] == [KafkaError.KAFKA_STORAGE_ERROR], \
                    [str(err) for err in big.errors]
            return bool(big.errors)

        # Reads go on while writes are refused: every acknowledged record, and nothing else.
        acked = sorted(acks.acked)
        assert [offset for offset, _ in acked] == list(range(len(acked))), \
            "a refused batch took offsets"
        assert [(offset, value) for offset, _, value in read_all(bootstrap, "fill")] == acked
        assert refused("fill"), "a record needing a new segment was accepted on a full disk"
        # kafka-python sees the same error (KafkaStorageError), not a time-out.
        kafka_producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=0,
                                       enable_idempotence=False, request_timeout_ms=10_000)
        future = kafka_producer.send("fill", value_of("fill", 1, BIG_VALUE), partition=0)
        with pytest.raises(KafkaStorageError):
            future.get(timeout=CLIENT_TIMEOUT_S)
        assert [(offset, value) for offset, _, value in read_all(bootstrap, "fill")] == acked

        # Deleting the topic frees its segments; writes are accepted again by themselves.
        admin = admin_of(bootstrap)
        for future in admin.delete_topics(["fill"]).values():
            future.result(CLIENT_TIMEOUT_S)
        wait_until(lambda: not refused("after"),
                   lambda: f"writes accepted again after deleting the topic:\n"
                           f"{broker.log_tail()}", every=0.2)
        more = Acks()
        # A segment still read by a response in flight is unlinked at once but its space
        # comes back only when the response is gone (at the cleaner's next look, a second
        # later under a full disk): retry as producers do.
        retrying = producer_of(bootstrap, **{"retries": 50, "retry.backoff.ms": 200,
                                             "message.timeout.ms": 60_000})
        for seq in range(1, 9):  # 2 MiB more: the deleted topic's space came back
            retrying.produce("after", value=value_of("after", seq, BIG_VALUE), partition=0,
                             on_delivery=more)
            flush(retrying)
        assert not more.errors, [str(err) for err in more.errors]
        after = read_all(bootstrap, "after")
        assert [value for _, _, value in after][-8:] == [value_of("after", seq, BIG_VALUE)
                                                         for seq in range(1, 9)]
        kafka_producer.close()
        kafka_producer = None
        code = broker.stop()
        assert code == 0, f"broker exited with {code} on SIGTERM:\n{broker.log_tail()}"
    finally:
        if kafka_producer is not None:
            kafka_producer.close(timeout=5)
        broker.kill()
    assert not any(mount_point.iterdir()), "the tmpfs contents leaked into the host namespace"


# ---- 3. a volume too small -------------------------------------------------------------------

@pytest.mark.timeout(120)
def test_a_volume_that_cannot_hold_four_segments_refuses_to_start(tmp_path):
    require_private_tmpfs(tmp_path)
    mount_point = tmp_path / "tmpfs"
    mount_point.mkdir()
    # 1 MiB under the product's default 1 GiB segments (the suite's 64 MiB default omitted)
    broker = TmpfsBroker(mount_point, "1m", dict(SMALL_INDEX), log_path=tmp_path / "broker.log",
                         omit=("commitlog.segment.bytes",))
    assert "commitlog.segment.bytes" not in broker.command()[-1]
    with open(broker.log_path, "wb") as log:
        proc = subprocess.Popen(broker.command(), stdout=log, stderr=subprocess.STDOUT)
    try:
        try:
            code = proc.wait(WAIT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the broker still runs on a 1 MiB volume after {WAIT_S}s:\n"
                        f"{broker.log_tail()}")
        assert code != MOUNT_FAILED, f"the tmpfs could not be mounted:\n{broker.log_tail()}"
        assert code != 0, f"the broker exited cleanly on a 1 MiB volume:\n{broker.log_tail()}"
        text = broker.log_path.read_text(errors="replace")
        assert "commitlog.segment.bytes" in text, text[-4000:]
        assert "listening on" not in text, text[-4000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
