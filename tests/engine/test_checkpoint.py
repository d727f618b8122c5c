"""StoreCheckpoint: the 4 KiB page round-trips, and a torn page reads as 'nothing known'."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from commitgate.engine.checkpoint import PAGE, Checkpoint, StoreCheckpoint

offsets = st.integers(0, 2**62)


@given(st.tuples(offsets, offsets, offsets, offsets, offsets, offsets))
def test_checkpoint_page_round_trips(fields):
    value = Checkpoint(*fields)
    page = value.encode()
    assert len(page) == PAGE
    assert Checkpoint.decode(page) == value


def test_saved_checkpoint_is_read_at_next_start(tmp_path):
    cp = StoreCheckpoint(tmp_path / "checkpoint")
    assert not cp.was_present
    cp.value.commitlog_flushed = 123
    cp.value.consumequeue_flushed = 45
    cp.save()
    again = StoreCheckpoint(tmp_path / "checkpoint")
    assert again.was_present
    assert (again.value.commitlog_flushed, again.value.consumequeue_flushed) == (123, 45)


def test_torn_checkpoint_is_detected_and_ignored(tmp_path):
    cp = StoreCheckpoint(tmp_path / "checkpoint")
    cp.value.commitlog_flushed = 999
    cp.save()
    data = bytearray((tmp_path / "checkpoint").read_bytes())
    data[3] ^= 0xFF
    (tmp_path / "checkpoint").write_bytes(bytes(data))
    again = StoreCheckpoint(tmp_path / "checkpoint")
    assert not again.was_present
    assert again.value == Checkpoint()
