"""The record walk in C (protocol/_record_keys.c) and in Python (protocol/record_walk.py) give
the same answers: for any produced batch (any records, keys, timestamps, codec, damage) the same
verdict (the status the gateway maps to a Kafka error code), text, record errors and keys; for
any records region fed in pieces of any size, the same walk state; for any stored batch, the
same index keys or the same refusal."""
from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commitgate.protocol import record_batch, record_walk
from commitgate.protocol.record_batch import (
    CODECS,
    INT64_MAX,
    INT64_MIN,
    KafkaBodyFormat,
    RecordRules,
    RecordSetCheck,
    validate_record_set,
)
from tests.c_and_python import c_helper
from tests.protocol.raw_batches import compress, record, seal

LIMIT = 1 << 16  # small: a few batches pass the decompression bound (32 times this)


@pytest.fixture(scope="module")
def c_walker() -> ModuleType:
    return c_helper("protocol._record_keys")


def _with(walker: ModuleType, call: Callable[[], object]) -> object:
    """``call()`` with ``walker`` as record_batch's walk; an exception is an answer too (the
    IndexBuilder skips a batch on any)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(record_batch, "walker", walker)
        try:
            return call()
        except Exception as exc:  # noqa: BLE001 - compared, not handled
            return type(exc), str(exc)


def _fields(check: RecordSetCheck) -> tuple:
    return (check.status, check.detail, check.headers, check.newest, check.record_errors,
            check.record_error_count, check.keys)


keys = st.one_of(st.none(), st.binary(max_size=12))
header_keys = st.one_of(st.none(), st.binary(max_size=4), st.text(max_size=3).map(str.encode))
records = st.lists(st.tuples(
    keys, st.one_of(st.none(), st.binary(max_size=60)),
    st.lists(st.tuples(header_keys, st.one_of(st.none(), st.binary(max_size=6))), max_size=2),
    st.integers(-3_000, 3_000),  # timestamp delta
    st.sampled_from([None, None, None, 0, 7, -1])), min_size=1, max_size=12)  # offset delta


@st.composite
def damaged(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` as sent, or with bytes changed, cut off or added."""
    out = bytearray(data)
    for _ in range(draw(st.integers(0, 2))):
        if out:
            out[draw(st.integers(0, len(out) - 1))] = draw(st.integers(0, 255))
    how = draw(st.sampled_from(["as is", "as is", "cut", "more"]))
    if how == "cut":
        out = out[:draw(st.integers(0, len(out)))]
    elif how == "more":
        out += draw(st.binary(min_size=1, max_size=4))
    return bytes(out)


@st.composite
def produced(draw: st.DrawFn) -> tuple[bytes, RecordRules, int]:
    """A produced batch (sealed with a right CRC, so the records are what is checked), the
    topic's rules and the key budget."""
    specs = draw(records)
    region = b"".join(record(i, key, value, headers, timestamp_delta=delta, offset_delta=offset)
                      for i, (key, value, headers, delta, offset) in enumerate(specs))
    codec = draw(st.sampled_from(sorted(CODECS)))
    if draw(st.booleans()):
        region = draw(damaged(region))
    payload = compress(codec, region)
    if draw(st.integers(0, 4)) == 0:
        payload = draw(damaged(payload))
    count = max(1, len(specs) + draw(st.sampled_from([0, 0, 0, -1, 1])))
    base = draw(st.sampled_from([1_000, -1, 0, INT64_MAX]))
    low = draw(st.sampled_from([INT64_MIN, 0, 900]))
    rules = RecordRules(draw(st.booleans()), (low, draw(st.sampled_from([INT64_MAX, 2_500]))))
    budget = draw(st.sampled_from([0, 40, 1 << 20]))
    return bytes(seal(payload, count, codec=CODECS[codec], base_timestamp=base)), rules, budget


@settings(max_examples=300, deadline=None)
@given(produced())
def test_c_and_python_give_the_same_verdict_error_code_and_keys_for_any_batch(c_walker, case):
    batch, rules, budget = case
    answers = [_with(walker, lambda: _fields(validate_record_set(batch, LIMIT, rules, budget)))
               for walker in (c_walker, record_walk)]
    assert answers[0] == answers[1]


@settings(max_examples=150, deadline=None)
@given(produced())
def test_c_and_python_give_a_stored_batch_the_same_index_keys(c_walker, case):
    body = memoryview(bytearray(case[0]))
    answers = [_with(walker, lambda: KafkaBodyFormat().keys(body))
               for walker in (c_walker, record_walk)]
    assert answers[0] == answers[1]


def _state(walk) -> tuple:
    return (walk.failure, walk.record_errors, walk.keys, walk.records, walk.max_timestamp,
            walk.error_count, walk.timestamp_errors)


@settings(max_examples=300, deadline=None)
@given(records, st.data(), st.integers(1, 9), st.integers(-1, 1),
       st.sampled_from([0, 1_000, -1, INT64_MAX]), st.booleans(),
       st.sampled_from([(INT64_MIN, INT64_MAX), (0, 1_500)]), st.sampled_from([0, 30, 1 << 20]))
def test_c_and_python_walks_agree_for_any_region_fed_in_any_pieces(
        c_walker, specs, data, piece, extra, base, need_keys, bounds, budget):
    region = data.draw(damaged(b"".join(
        record(i, key, value, headers, timestamp_delta=delta, offset_delta=offset)
        for i, (key, value, headers, delta, offset) in enumerate(specs))))
    answers = []
    for walker in (c_walker, record_walk):
        walk = walker.RecordWalk(len(specs) + extra, base, need_keys, *bounds, budget)
        fed = [walk.feed(region[i:i + piece]) for i in range(0, len(region), piece)]
        answers.append((fed, walk.finish(), _state(walk)))
    assert answers[0] == answers[1]
