"""The IndexBuilder's C walk (follow) over CommitLog entries (engine/_commit_log.c) with the Kafka
body scanner: the entries it reports, where and why it stops, and that it indexes what the
IndexBuilder's walk in Python indexes."""
from __future__ import annotations

import struct
import tempfile
from array import array
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commitgate.engine import index_builder
from commitgate.engine.commit_log import CommitLog, DispatchRequest, topic_trailer
from commitgate.engine.config import StoreConfig
from commitgate.engine.mapped_file_queue import MappedFileQueue
from commitgate.protocol.record_batch import KafkaBodyFormat
from tests.c_and_python import c_helper
from tests.engine.conftest import SMALL, batch

walk_module = c_helper("engine._commit_log")
SCANNER = KafkaBodyFormat.scanner
LIMIT, BLANK, INVALID = 0, 1, 2


def _log(tmp_path, size=16384) -> CommitLog:
    return CommitLog(MappedFileQueue(tmp_path, size), KafkaBodyFormat())


def _append(log: CommitLog, body: memoryview, topic="t", partition=0, store_ts=5678
            ) -> DispatchRequest:
    req = DispatchRequest(topic, partition, 0, 1, 0, 0, 1234, store_ts, 0)
    log.append(req, body, topic_trailer(topic), born_host=1, store_host=2)
    return req


def _walk(log: CommitLog, pos: int, limit: int) -> tuple[int, int, list]:
    """One pass of follow up to ``limit`` (as the dispatched end), without waiting."""
    return _follow(log, pos, limit, array("q", [0, 0]), 0)


def test_reports_only_entries_with_keys_and_compressed_ones_for_the_python_path(tmp_path):
    log = _log(tmp_path)
    keyed = _append(log, batch([b"a", b"b", b"c"], keys=[b"k1", None, b"k3"]), "orders", 4, 99)
    _append(log, batch([b"no keys"] * 3))
    packed = _append(log, batch([b"v"], keys=[b"z"], compression="gzip"), "gz", 1, 7)
    end = log.max_offset
    walked, stop, found = _walk(log, 0, end)
    assert (walked, stop) == (end, LIMIT)
    assert found == [(keyed.phy_offset, keyed.size, 4, 99, b"orders", [b"k1", b"k3"]),
                     (packed.phy_offset, packed.size, 1, 7, b"gz", None)]


def test_stops_before_an_entry_past_the_limit_at_a_blank_and_at_damage(tmp_path):
    log = _log(tmp_path, size=4096)
    first = _append(log, batch([b"x" * 100], keys=[b"k"]))
    second = _append(log, batch([b"y" * 100], keys=[b"l"]))
    assert _walk(log, 0, second.phy_offset + second.size - 1)[:2] == (second.phy_offset, LIMIT)
    while log.queue.files[0].free_bytes > 2000:  # fill the segment: it ends with a blank
        _append(log, batch([b"z" * 500]))
    _append(log, batch([b"z" * 1500]))
    segment = log.queue.files[0]
    walked, stop, found = _walk(log, 0, segment.size)
    assert stop == BLANK and walked < segment.size
    assert [f[0] for f in found] == [first.phy_offset, second.phy_offset]
    segment.write_at(second.phy_offset + 4, (struct.pack(">I", 0xBAD),), 4)  # MAGICCODE
    assert _walk(log, 0, segment.size)[:2] == (second.phy_offset, INVALID)


def test_refuses_a_walk_outside_the_segment_and_a_foreign_capsule(tmp_path):
    log = _log(tmp_path)
    _append(log, batch([b"x"]))
    with pytest.raises(ValueError, match="outside"):
        _walk(log, 1 << 20, 1 << 20)
    with pytest.raises(ValueError):
        walk_module.follow(log.queue.files[0].view(), 0, 0, object(), array("q", [10]),
                           array("q", [0, 0]), 1000, 0)


def _follow(log: CommitLog, pos: int, dispatched: int, control: array, budget_us: int
            ) -> tuple[int, int, list]:
    mapped = log.queue.files[0]
    return walk_module.follow(mapped.view(), pos, mapped.start_offset, SCANNER,
                              array("q", [dispatched]), control, 1000, budget_us)


@pytest.mark.timeout(20)
def test_follow_walks_to_the_dispatched_end_and_publishes_only_keyless_stretches(tmp_path):
    log = _log(tmp_path)
    plain = _append(log, batch([b"no keys"] * 3))
    keyed = _append(log, batch([b"a"], keys=[b"k"]), "orders", 2, 42)
    _append(log, batch([b"more"]))
    control = array("q", [0, -1])
    # Only the first entry is dispatched: it walks it, publishes its end, waits out the budget.
    assert _follow(log, 0, plain.size, control, 2000) == (plain.size, LIMIT, [])
    assert control[1] == plain.size
    # With all dispatched it walks to the end, returns for the keyed entry at once and
    # publishes nothing past the start of the stretch that held it.
    walked, stop, found = _follow(log, plain.size, log.max_offset, control, 60_000_000)
    assert (walked, stop) == (log.max_offset, LIMIT)
    assert found == [(keyed.phy_offset, keyed.size, 2, 42, b"orders", [b"k"])]
    assert control[1] == plain.size


@pytest.mark.timeout(20)
def test_follow_returns_when_woken_and_refuses_bad_cells(tmp_path):
    log = _log(tmp_path)
    _append(log, batch([b"x"]))
    end = log.max_offset
    assert _follow(log, end, end, array("q", [1, 0]), 60_000_000)[:2] == (end, LIMIT)
    with pytest.raises(ValueError, match="cells"):
        _follow(log, 0, end, array("q", [0]), 1000)
    with pytest.raises(ValueError, match="outside"):
        _follow(log, 1 << 20, end, array("q", [0, 0]), 1000)


class _Recorder:
    """An IndexService that notes what it is given."""

    def __init__(self) -> None:
        self.puts: list[tuple[int, list[bytes], int]] = []

    def put_keys(self, keys, phy_offset: int, store_timestamp_ms: int) -> None:
        self.puts.append((phy_offset, list(keys), store_timestamp_ms))


def _indexed(log: CommitLog, directory: Path, in_c: bool) -> list[tuple[int, list[bytes], int]]:
    """What an IndexBuilder puts into its IndexFiles for the whole CommitLog, its worker's
    rounds run here until it is caught up."""
    with pytest.MonkeyPatch.context() as patch:
        if not in_c:
            patch.setattr(index_builder, "_follow", None)
        builder = index_builder.IndexBuilder(
            directory, log, KafkaBodyFormat(), None, StoreConfig(data_dir=directory, **SMALL),
            array("q", [log.max_offset]))
    assert (builder._scanner is not None) == in_c
    builder.service = _Recorder()
    while builder._index_some(0.0):
        pass
    assert builder.indexed == log.max_offset
    return builder.service.puts


entries = st.lists(st.tuples(
    st.lists(st.one_of(st.none(), st.binary(max_size=8)), min_size=1, max_size=6),  # keys
    st.sampled_from(["none", "none", "gzip", "lz4"]),
    st.sampled_from(["t", "orders"]), st.integers(0, 3), st.integers(0, 2**40),
    st.one_of(st.none(), st.tuples(st.integers(61), st.integers(0, 255)))),  # a byte changed
    min_size=1, max_size=25)


@settings(max_examples=60, deadline=None)
@given(entries)
def test_the_c_and_python_walks_index_the_same_keys_at_the_same_entries(entries):
    """Small segments (rolls and BLANK fillers), compressed entries (the Python path from the
    C walk too) and damaged bodies (skipped by both)."""
    with tempfile.TemporaryDirectory() as directory:
        log = _log(Path(directory), size=4096)
        for keys, compression, topic, partition, store_ts, damage in entries:
            body = batch([b"v" * 40] * len(keys), keys=keys, compression=compression)
            if damage is not None:
                body[damage[0] % len(body)] = damage[1]
            _append(log, body, topic, partition, store_ts)
        answers = [_indexed(log, Path(directory) / "index", in_c) for in_c in (True, False)]
        log.queue.close()
    assert answers[0] == answers[1]
