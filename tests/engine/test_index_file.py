"""IndexFile / IndexService on real files in a temp dir."""
from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commitgate.engine.index_file import (
    ENTRY_SIZE,
    HEADER_SIZE,
    IndexEntry,
    IndexFile,
    IndexHeader,
    IndexService,
    file_name,
    file_size,
    is_index_file_name,
    key_hash,
    read_entry,
    read_header,
    write_entry,
    write_header,
)

T0 = 1_700_000_000_000  # a store timestamp in ms
WIDE = (0, 2**62)


def new_file(tmp_path: Path, slots: int = 64, entries: int = 256) -> IndexFile:
    return IndexFile.create(tmp_path / file_name(T0), slots, entries)


def colliding_keys(slots: int, count: int, slot: int = 0) -> list[bytes]:
    """Distinct keys that all hash into ``slot``."""
    keys, i = [], 0
    while len(keys) < count:
        key = b"t#k%d" % i
        if key_hash(key) % slots == slot:
            keys.append(key)
        i += 1
    return keys


# ---- IndexFile ------------------------------------------------------------------------------------

def test_create_makes_full_size_file_with_empty_header(tmp_path):
    f = new_file(tmp_path)
    assert f.path.stat().st_size == file_size(64, 256) == HEADER_SIZE + 64 * 4 + 256 * ENTRY_SIZE
    assert f.header() == IndexHeader(0, 0, 0, 0, 64, 1)
    assert f.entry_count == 0 and not f.is_full
    assert f.lookup(b"t#a", *WIDE, 10) == []
    f.close()


def test_put_and_lookup(tmp_path):
    f = new_file(tmp_path)
    assert f.put(b"t#a", 100, T0)
    assert f.put(b"t#b", 200, T0 + 5)
    assert f.lookup(b"t#a", *WIDE, 10) == [100]
    assert f.lookup(b"t#b", *WIDE, 10) == [200]
    assert f.lookup(b"t#missing", *WIDE, 10) == []
    f.close()


def test_header_fields_after_puts(tmp_path):
    f = new_file(tmp_path)
    f.put(b"t#a", 500, T0)
    f.put(b"t#b", 900, T0 + 3_000)
    f.put(b"t#c", 700, T0 + 1_000)  # an older offset / time (re-index after restart)
    expected = IndexHeader(T0, T0 + 3_000, 500, 900, 64, 4)
    assert f.header() == expected
    with open(f.path, "rb") as raw:
        assert read_header(raw.read(HEADER_SIZE)) == expected  # written through the mapping
    assert (f.begin_timestamp, f.end_timestamp, f.end_phy_offset) == (T0, T0 + 3_000, 900)
    f.close()


def test_collisions_chain_newest_first(tmp_path):
    f = new_file(tmp_path, slots=4, entries=256)
    keys = colliding_keys(4, 20)
    for phy, key in enumerate(keys):
        f.put(key, phy, T0)
    for phy, key in enumerate(keys):
        assert f.lookup(key, *WIDE, 100) == [phy]
    # the same key many times: the whole chain, newest first, through the other keys' entries
    f2 = IndexFile.create(tmp_path / file_name(T0 + 1), 1, 256)
    for phy in range(50):
        f2.put(b"t#same" if phy % 2 == 0 else b"t#other%d" % phy, phy, T0)
    assert f2.lookup(b"t#same", *WIDE, 100) == list(range(48, -1, -2))
    f.close()
    f2.close()


def test_max_count(tmp_path):
    f = new_file(tmp_path)
    for phy in range(10):
        f.put(b"t#k", phy * 10, T0 + phy)
    assert f.lookup(b"t#k", *WIDE, 3) == [90, 80, 70]
    assert f.lookup(b"t#k", *WIDE, 0) == []
    assert len(f.lookup(b"t#k", *WIDE, 100)) == 10
    f.close()


def test_time_range_inclusive(tmp_path):
    f = new_file(tmp_path)
    for i in range(5):  # entries at T0, T0+10s, ..., T0+40s
        f.put(b"t#k", i, T0 + i * 10_000)
    assert f.lookup(b"t#k", T0 + 10_000, T0 + 30_000, 10) == [3, 2, 1]
    assert f.lookup(b"t#k", T0 + 11_000, T0 + 29_999, 10) == [2]  # whole seconds: see below
    assert f.lookup(b"t#k", T0 - 5_000, T0 - 1, 10) == []
    assert f.lookup(b"t#k", T0 + 40_000, T0 + 40_000, 10) == [4]
    f.close()


def test_time_kept_in_seconds_is_conservative(tmp_path):
    """Sub-second parts are lost; a matching entry is never dropped, a near one may be kept."""
    f = new_file(tmp_path)
    f.put(b"t#k", 1, T0)
    f.put(b"t#k", 2, T0 + 1_700)  # stored as second 1: somewhere in [T0+1000, T0+1999]
    assert f.lookup(b"t#k", T0 + 1_650, T0 + 1_750, 10) == [2]
    assert f.lookup(b"t#k", T0 + 1_900, T0 + 5_000, 10) == [2]  # 200 ms late, still returned
    assert f.lookup(b"t#k", T0 + 2_000, T0 + 5_000, 10) == []
    f.close()


def test_full_file_refuses(tmp_path):
    f = new_file(tmp_path, slots=8, entries=5)  # entry 0 unused: 4 entries fit
    assert all(f.put(b"t#%d" % i, i, T0) for i in range(4))
    assert f.is_full
    assert not f.put(b"t#x", 99, T0)
    assert f.entry_count == 4
    assert f.lookup(b"t#3", *WIDE, 10) == [3]
    f.close()


def test_reopen_from_disk(tmp_path):
    f = new_file(tmp_path, slots=4)
    for phy in range(30):
        f.put(b"t#k%d" % (phy % 3), phy, T0 + phy * 1_000)
    f.flush()
    header = f.header()
    f.close()
    g = IndexFile.open(f.path)
    assert g.header() == header and g.max_entries == 256
    assert g.lookup(b"t#k1", *WIDE, 100) == list(range(28, 0, -3))
    assert g.put(b"t#k1", 1_000, T0 + 60_000)
    assert g.lookup(b"t#k1", *WIDE, 2) == [1_000, 28]
    g.destroy()
    assert not f.path.exists()


def test_open_rejects_a_header_that_does_not_fit(tmp_path):
    path = tmp_path / file_name(T0)
    path.write_bytes(bytes(HEADER_SIZE + 100))  # slot count 0
    with pytest.raises(ValueError):
        IndexFile.open(path)


def test_stale_slot_from_a_lost_header_is_ignored(tmp_path):
    """A crash can persist slots but not the header's indexCount: such slots read as empty."""
    f = new_file(tmp_path, slots=1)
    f.put(b"t#a", 1, T0)
    f.put(b"t#b", 2, T0)
    f.flush()
    f.close()
    with open(f.path, "r+b") as raw:
        raw.seek(0)
        raw.write(bytes(write_header_bytes(IndexHeader(T0, T0, 1, 1, 1, 2))))
    g = IndexFile.open(f.path)
    assert g.lookup(b"t#b", *WIDE, 10) == []  # entry 2 is past indexCount
    assert g.lookup(b"t#a", *WIDE, 10) == []  # the slot points past the count: treated as empty
    assert g.put(b"t#c", 3, T0)  # overwrites entry 1, chain restarts
    assert g.lookup(b"t#c", *WIDE, 10) == [3]
    g.close()


def write_header_bytes(header: IndexHeader) -> bytearray:
    buf = bytearray(HEADER_SIZE)
    write_header(buf, header)
    return buf


def test_file_names_sort_by_age_and_never_repeat():
    first = file_name(T0)
    assert len(first) == 17 and is_index_file_name(first)
    assert file_name(T0, first) > first  # same millisecond: bumped by one
    assert int(file_name(T0, first)) == int(first) + 1
    assert file_name(T0 - 3_600_000, first) > first  # clock went back
    late = "20231231235959999"
    assert file_name(T0, late) == "20240101000000000"
    assert not is_index_file_name("20231331000000000") and not is_index_file_name("abc")


# ---- IndexService ---------------------------------------------------------------------------------

def new_service(path: Path, slots: int = 16, entries: int = 9) -> IndexService:
    service = IndexService(path, slots, entries)
    service.load()
    return service


def test_service_rolls_when_full_and_queries_across_files(tmp_path):
    service = new_service(tmp_path)  # 8 entries per file
    for phy in range(20):
        service.put_keys([b"t#k", b"t#other%d" % phy], phy * 100, T0 + phy * 1_000)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(service.files) == len(names) == 5  # 40 keys / 8
    assert [f.path.name for f in service.files] == names
    assert all(f.is_full for f in service.files)
    assert service.query(b"t#k", *WIDE, 100) == [phy * 100 for phy in range(19, -1, -1)]
    assert service.query(b"t#k", *WIDE, 5) == [1900, 1800, 1700, 1600, 1500]
    assert service.query(b"t#other3", *WIDE, 100) == [300]
    assert service.end_phy_offset == 1900
    service.close()


def test_service_skips_files_outside_the_time_range(tmp_path):
    service = new_service(tmp_path)
    for phy in range(20):
        service.put_keys([b"t#k"], phy, T0 + phy * 10_000)
    assert service.query(b"t#k", T0 + 50_000, T0 + 120_000, 100) == list(range(12, 4, -1))
    assert service.query(b"t#k", T0 + 500_000, T0 + 600_000, 100) == []
    service.close()


def test_service_reopen(tmp_path):
    service = new_service(tmp_path)
    for phy in range(30):
        service.put_keys([b"t#k%d" % (phy % 4)], phy, T0 + phy)
    service.flush()
    service.close()
    again = new_service(tmp_path)
    assert len(again.files) == 4 and again.end_phy_offset == 29
    assert again.query(b"t#k2", *WIDE, 100) == list(range(26, 0, -4))
    again.put_keys([b"t#k2"], 30, T0 + 30)  # goes into the last file (6 of 8 used)
    assert len(again.files) == 4
    assert again.query(b"t#k2", *WIDE, 2) == [30, 26]
    again.close()


def test_truncate_after(tmp_path):
    service = new_service(tmp_path)  # files hold phy [0..7], [8..15], [16..23], [24..29]
    for phy in range(30):
        service.put_keys([b"t#k"], phy, T0)
    assert service.truncate_after(30) == 30  # nothing past it: keep everything
    assert len(service.files) == 4
    # 20 is inside the third file: it goes with the fourth, re-index from its start
    assert service.truncate_after(20) == 16
    assert len(service.files) == 2 and len(list(tmp_path.iterdir())) == 2
    assert service.end_phy_offset == 15
    assert service.query(b"t#k", *WIDE, 100) == list(range(15, -1, -1))
    # 16 is exactly past the second file: nothing to re-index
    assert service.truncate_after(16) == 16 and len(service.files) == 2
    service.put_keys([b"t#k"], 16, T0)  # the caller resumes; a new file is rolled
    assert len(service.files) == 3 and service.query(b"t#k", *WIDE, 1) == [16]
    assert service.truncate_after(0) == 0 and service.files == ()
    assert list(tmp_path.iterdir()) == [] and service.end_phy_offset == 0
    service.close()


def test_truncate_after_reports_a_repeated_older_offset(tmp_path):
    service = new_service(tmp_path)
    for phy in range(10):  # file 2 starts at 8
        service.put_keys([b"t#k"], phy, T0)
    service.put_keys([b"t#k"], 5, T0)  # re-indexed after a restart, lands in file 2
    assert service.truncate_after(9) == 5


def test_delete_files_below(tmp_path):
    service = new_service(tmp_path)
    for phy in range(30):
        service.put_keys([b"t#k"], phy, T0)
    assert service.delete_files_below(16) == 2  # [0..7] and [8..15]
    assert len(service.files) == 2 and len(list(tmp_path.iterdir())) == 2
    assert service.query(b"t#k", *WIDE, 100) == list(range(29, 15, -1))
    assert service.delete_files_below(1_000) == 1  # the newest file stays
    assert len(service.files) == 1 and service.end_phy_offset == 29
    service.close()


def test_load_drops_a_damaged_file_and_later_ones(tmp_path):
    service = new_service(tmp_path)
    for phy in range(20):
        service.put_keys([b"t#k"], phy, T0)
    service.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    os.truncate(tmp_path / names[1], 10)
    (tmp_path / "not-an-index").write_bytes(b"x")
    again = new_service(tmp_path)
    assert [f.path.name for f in again.files] == names[:1]
    assert sorted(p.name for p in tmp_path.iterdir()) == [names[0], "not-an-index"]
    assert again.truncate_after(20) == 7  # re-index after what the kept file holds
    again.close()


def test_create_failure_names_the_file(tmp_path):
    service = new_service(tmp_path / "index")
    shutil.rmtree(tmp_path / "index")
    with pytest.raises(OSError, match="index"):
        service.put_keys([b"t#k"], 0, T0)


# ---- properties -----------------------------------------------------------------------------------

int64 = st.integers(-(2**63), 2**63 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)


@given(st.builds(IndexHeader, int64, int64, int64, int64, int32, int32))
def test_header_round_trip(header):
    assert read_header(write_header_bytes(header)) == header


@given(st.builds(IndexEntry, int32, int64, int32, int32), st.integers(0, 3))
def test_entry_round_trip(entry, slot):
    buf = bytearray(HEADER_SIZE + 4 * ENTRY_SIZE)
    write_entry(buf, HEADER_SIZE + slot * ENTRY_SIZE, entry)
    assert read_entry(buf, HEADER_SIZE + slot * ENTRY_SIZE) == entry


puts = st.lists(st.tuples(st.binary(max_size=6), st.integers(0, 2**40), st.integers(0, 10**7)),
                max_size=60)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(puts)
def test_every_put_is_found(tmp_path, sequence):
    """Model check against a dict: lookup finds each key's offsets, newest first, across rolls."""
    directory = Path(tempfile.mkdtemp(dir=tmp_path))
    service = new_service(directory, slots=4, entries=7)
    model: dict[int, list[int]] = {}  # by hash: keys sharing all 31 bits are indistinguishable
    clock = T0
    for key, phy, step in sequence:
        clock += step
        service.put_keys([b"t#" + key], phy, clock)
        model.setdefault(key_hash(b"t#" + key), []).insert(0, phy)
    for key, _phy, _step in sequence:
        assert service.query(b"t#" + key, *WIDE, 1_000) == model[key_hash(b"t#" + key)]
    service.close()
    shutil.rmtree(directory)


def test_queries_while_a_worker_puts_and_retention_deletes(tmp_path):
    """The store's threads: one putting, one deleting old files, the loop querying."""
    service = new_service(tmp_path, slots=8, entries=33)
    done = threading.Event()

    def worker() -> None:
        for phy in range(1_000):
            service.put_keys([b"t#k", b"t#x%d" % phy], phy, T0 + phy)
            if phy % 200 == 0:
                service.flush()
        done.set()

    def retention() -> None:
        while not done.is_set():
            service.delete_files_below(service.end_phy_offset - 200)
            time.sleep(0.001)

    threads = [threading.Thread(target=worker), threading.Thread(target=retention)]
    for t in threads:
        t.start()
    while not done.is_set():
        found = service.query(b"t#k", *WIDE, 50)
        assert found == sorted(found, reverse=True) and len(set(found)) == len(found)
    for t in threads:
        t.join()
    assert service.query(b"t#k", *WIDE, 3) == [999, 998, 997]
    service.close()
