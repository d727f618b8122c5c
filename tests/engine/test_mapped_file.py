"""MappedFile: pwritev appends, zero-copy reads, flush positions, truncation, close rules."""
from __future__ import annotations

import os

from commitgate.engine.mapped_file import MappedFile


def test_append_returns_positions_and_reads_back_without_copy(tmp_path):
    mapped = MappedFile(tmp_path / "seg", 0, 4096, create=True)
    assert mapped.append((b"abc", bytearray(b"de")), 5) == 0
    assert mapped.append((memoryview(b"xyz"),), 3) == 5
    view = mapped.read(0, 8)
    assert isinstance(view, memoryview) and bytes(view) == b"abcdexyz"
    assert mapped.wrote_position == mapped.committed_position == 8
    view.release()
    mapped.close()


def test_new_file_is_reserved_at_full_size(tmp_path):
    MappedFile(tmp_path / "seg", 0, 1 << 20, create=True).close()
    stat = os.stat(tmp_path / "seg")
    assert stat.st_size == 1 << 20
    assert stat.st_blocks * 512 >= 1 << 20  # fallocate gave it real blocks


def test_flush_moves_flushed_position_to_wrote_position(tmp_path):
    mapped = MappedFile(tmp_path / "seg", 0, 4096, create=True)
    mapped.append((b"x" * 100,), 100)
    assert mapped.flushed_position == 0
    assert mapped.flush() == 100
    assert mapped.flushed_position == 100
    mapped.close()


def test_write_past_end_is_refused(tmp_path):
    mapped = MappedFile(tmp_path / "seg", 0, 64, create=True)
    try:
        mapped.write_at(60, (b"12345",), 5)
    except ValueError as exc:
        assert "passes the end" in str(exc)
    else:
        raise AssertionError("a write past the end was accepted")
    mapped.close()


def test_truncate_to_zeroes_the_tail(tmp_path):
    mapped = MappedFile(tmp_path / "seg", 0, 4096, create=True)
    mapped.append((b"k" * 1000,), 1000)
    mapped.truncate_to(300)
    assert mapped.wrote_position == 300
    assert bytes(mapped.read(0, 1000)) == b"k" * 300 + bytes(700)
    mapped.close()


def test_close_waits_while_a_view_is_exported(tmp_path):
    mapped = MappedFile(tmp_path / "seg", 0, 4096, create=True)
    mapped.append((b"data",), 4)
    held = mapped.read(0, 4)
    assert mapped.destroy() is False  # unlinked, but the mapping stays for the reader
    assert not (tmp_path / "seg").exists()
    assert bytes(held) == b"data"
    held.release()
    assert mapped.close() is True


def test_reopen_existing_file_sees_data(tmp_path):
    mapped = MappedFile(tmp_path / "seg", 4096, 4096, create=True)
    mapped.append((b"persist",), 7)
    mapped.close()
    again = MappedFile(tmp_path / "seg", 4096, 4096, create=False)
    assert bytes(again.read(0, 7)) == b"persist"
    assert again.end_offset == 8192
    again.close()


def test_warm_up_touches_every_page(tmp_path):
    mapped = MappedFile(tmp_path / "seg", 0, 64 * 1024, create=True)
    mapped.warm_up()
    assert bytes(mapped.read(0, 64 * 1024)) == bytes(64 * 1024)
    mapped.close()


def test_flushing_a_file_closed_meanwhile_is_a_no_op(tmp_path):
    """A ConsumeQueue flush may reach a file its topic's deletion just closed."""
    mapped = MappedFile(tmp_path / "seg", 0, 4096, create=True)
    mapped.append((b"x" * 100,), 100)
    assert mapped.close()
    assert mapped.flush() == 0  # nothing synced, no error: the file is gone with its topic
