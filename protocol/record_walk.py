"""The records of a RecordBatch v2 walked in Python: the fallback of ``_record_keys.c``.

Same interface, same checks, same answers (failure texts, record errors, keys) as the C walk,
which says what is checked and why; the tests hold the two to it byte for byte. Like the C walk
it reads fields as a state machine over pieces of any size and buffers no record: varints are
carried across pieces, keys, values and header values are passed over by counting, so a
compressed batch fed in decompressed pieces holds one piece (and the keys it was asked to
copy, within their budget) at a time. It works a field at a time, not a byte at a time, except
for varints and non-ASCII header keys.

Record layout (varints are zigzag-encoded):
  length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
  keyLength varint | key | valueLength varint | value | headerCount varint |
  (headerKeyLength varint | headerKey | headerValueLength varint | headerValue) * headerCount
"""
from __future__ import annotations

import struct

INT32_MIN, INT32_MAX = -2 ** 31, 2 ** 31 - 1
INT64_MIN, INT64_MAX = -2 ** 63, 2 ** 63 - 1
UINT64_MASK = 2 ** 64 - 1
NO_TIMESTAMP = -1
MIN_RECORD_BODY = 6       # attributes and five one-byte varints
MAX_RECORD_ERRORS = 1000  # kept for the response; all are counted
KEY_SPAN_COST = 16        # the C walk counts each copied key's span against the key budget
KEY_MISSING, TIMESTAMP_OUT_OF_RANGE = 1, 2

# The field the walk reads next (the C walk's Phase).
(LENGTH, ATTRIBUTES, TIMESTAMP, OFFSET, KEY_LENGTH, KEY, VALUE_LENGTH, VALUE, HEADER_COUNT,
 HEADER_KEY_LENGTH, HEADER_KEY, HEADER_VALUE_LENGTH, HEADER_VALUE, DONE, FAILED) = range(15)
PASSED = (KEY, VALUE, HEADER_KEY, HEADER_VALUE)  # fields passed over by counting
FIELD_NAMES = {KEY: "key", VALUE: "value", HEADER_KEY: "header key",
               HEADER_VALUE: "header value"}
NEXT_FIELD = {KEY_LENGTH: KEY, VALUE_LENGTH: VALUE, HEADER_KEY_LENGTH: HEADER_KEY,
              HEADER_VALUE_LENGTH: HEADER_VALUE}

# Header keys must be UTF-8: the C walk's DFA, whose state survives the end of a piece. States:
# 0 complete; 1-3 continuation bytes still due; 4-7 the second byte of a sequence whose first
# byte narrows its range (overlongs, surrogates, > U+10FFFF); -1 invalid.
UTF8_OK, UTF8_BAD = 0, -1
UTF8_LOW = (0, 0x80, 0x80, 0x80, 0xA0, 0x80, 0x90, 0x80)
UTF8_HIGH = (0, 0xBF, 0xBF, 0xBF, 0xBF, 0x9F, 0xBF, 0x8F)
UTF8_NEXT = (0, 0, 1, 2, 1, 1, 2, 2)
UTF8_NARROW_LEADS = {0xE0: 4, 0xED: 5, 0xF0: 6, 0xF4: 7}


def _utf8_lead(byte: int) -> int:
    """The state after a sequence's first byte."""
    if byte < 0x80:
        return 0
    if 0xC2 <= byte <= 0xDF:
        return 1
    if byte in UTF8_NARROW_LEADS:
        return UTF8_NARROW_LEADS[byte]
    if 0xE1 <= byte <= 0xEF:
        return 2
    return 3 if 0xF1 <= byte <= 0xF3 else UTF8_BAD


UTF8_LEAD = tuple(_utf8_lead(byte) for byte in range(256))


def utf8_step(state: int, data: memoryview) -> int:
    """The DFA's state after ``data`` (UTF8_BAD at the first byte that cannot follow)."""
    if state == UTF8_OK and data.tobytes().isascii():  # ASCII keeps a complete state complete
        return state
    for byte in data:
        if state == UTF8_OK:
            state = UTF8_LEAD[byte]
        elif UTF8_LOW[state] <= byte <= UTF8_HIGH[state]:
            state = UTF8_NEXT[state]
        else:
            state = UTF8_BAD
        if state == UTF8_BAD:
            break
    return state


class RecordWalk:
    """RecordWalk(count, base_timestamp, need_keys=False, low=-2**63, high=2**63-1,
    key_budget=0): validates a v2 records region fed in pieces of any size. ``strict=False``
    (stored batches, for their keys) leaves out the produce-only checks: offset deltas 0, 1,
    2..., header keys UTF-8 and the attributes' high bit."""

    __slots__ = (
        "_errors",
        "_failure",
        "_key",
        "_key_budget",
        "_key_bytes",
        "_keys",
        "base_timestamp",
        "count",
        "error_count",
        "headers",
        "high",
        "left",
        "length",
        "low",
        "max_timestamp",
        "need_keys",
        "phase",
        "records",
        "shift",
        "skip",
        "strict",
        "timestamp",
        "timestamp_errors",
        "utf8",
        "varint",
    )

    def __init__(self, count: int, base_timestamp: int, need_keys: bool = False,
                 low: int = INT64_MIN, high: int = INT64_MAX, key_budget: int = 0, *,
                 strict: bool = True) -> None:
        self.count, self.base_timestamp = count, base_timestamp
        self.need_keys, self.low, self.high, self.strict = bool(need_keys), low, high, strict
        self.phase = LENGTH if count > 0 else DONE
        self.varint = self.shift = self.length = self.left = self.skip = self.headers = 0
        self.utf8 = UTF8_OK
        self.records = self.timestamp = self.error_count = self.timestamp_errors = 0
        self.max_timestamp = NO_TIMESTAMP
        self._errors: list[tuple[int, int, int]] = []
        self._failure = ""
        self._key_budget = max(key_budget, 0)
        self._keys: list[bytes] | None = [] if self._key_budget else None
        self._key: bytearray | None = None  # the key being copied
        self._key_bytes = 0

    @property
    def failure(self) -> str | None:
        """Why the records are malformed, or None."""
        return self._failure if self.phase == FAILED else None

    @property
    def record_errors(self) -> list[tuple[int, int, int]]:
        """(record index, kind, timestamp) of the first record errors; kind 1: no key, 2:
        timestamp out of range."""
        return list(self._errors)

    @property
    def keys(self) -> list[bytes] | None:
        """The non-null keys in order, when copied within key_budget and the walk is done."""
        return list(self._keys) if self._keys is not None and self.phase == DONE else None

    def feed(self, data: bytes | bytearray | memoryview) -> bool:
        """Walk the next bytes of the records region; False once malformed."""
        buf = memoryview(data).cast("B")
        pos, end = 0, len(buf)
        while pos < end and self.phase != FAILED:
            phase = self.phase
            if phase == DONE:
                self.phase = FAILED
                self._failure = (f"bytes follow the last of the {self.count} records the "
                                 f"batch header claims")
                break
            # the field's bytes in buf: the record's length is not known before it is read
            limit = end if phase == LENGTH or self.left >= end - pos else pos + self.left
            if phase in PASSED:
                pos = self._pass(buf, pos, limit)
            elif phase == ATTRIBUTES:
                pos = self._attributes(buf[pos], pos)
            else:
                pos = self._varint_field(buf, pos, limit)
        return self.phase != FAILED

    def finish(self) -> bool:
        """After the last feed: False unless exactly the claimed records were read."""
        if self.phase in (FAILED, DONE):
            return self.phase == DONE
        if self.phase == LENGTH and self.shift == 0:
            self._failure = (f"the records end after {self.records} of the {self.count} "
                             f"records the batch header claims")
        else:
            self._failure = f"record {self.records} is cut off by the end of the records"
        self.phase = FAILED
        return False

    def _attributes(self, attributes: int, pos: int) -> int:
        """A record's attributes byte (a record is at least MIN_RECORD_BODY long)."""
        if self.strict and attributes & 0x80:  # unused in v2; aiokafka reads a varint
            self._fail(f"record attributes 0x{attributes:02x}: the high bit must be clear")
            return pos
        self.left -= 1
        self.phase = TIMESTAMP
        return pos + 1

    def _pass(self, buf: memoryview, pos: int, limit: int) -> int:
        """Pass over the bytes of a key, value or header field that are in ``buf``."""
        n = min(self.skip, limit - pos)
        if self.phase == HEADER_KEY and self.strict:
            self.utf8 = utf8_step(self.utf8, buf[pos:pos + n])
            if self.utf8 == UTF8_BAD:
                self._fail("a header key is not valid UTF-8")
                return pos
        if self.phase == KEY and self._key is not None:
            self._key += buf[pos:pos + n]
        self.skip -= n
        self.left -= n
        if self.skip == 0:
            self._end_field()
        return pos + n

    def _varint_field(self, buf: memoryview, pos: int, limit: int) -> int:
        """Continue the varint of the current field; take its value once it is whole."""
        phase, start = self.phase, pos
        max_shift = 70 if phase == TIMESTAMP else 35  # 10 bytes for a varlong, else 5
        varint, shift, whole = self.varint, self.shift, False
        while pos < limit and not whole:
            byte = buf[pos]
            pos += 1
            varint |= (byte & 0x7F) << shift
            shift += 7
            whole = byte < 0x80
            if not whole and shift >= max_shift:
                self._fail(f"a varint is longer than {max_shift // 7} bytes")
                return pos
        if phase != LENGTH:
            self.left -= pos - start
        if not whole:  # the field goes on in the next piece
            self.varint, self.shift = varint, shift
            if phase != LENGTH and self.left == 0:
                self._fail(f"its fields run past its length {self.length}")
            return pos
        varint &= UINT64_MASK  # bits past 64 are lost, as in C
        value = (varint >> 1) ^ -(varint & 1)
        self.varint = self.shift = 0
        if phase != TIMESTAMP and not INT32_MIN <= value <= INT32_MAX:
            self._fail(f"varint {value} is out of the 32-bit range")
            return pos
        self._take(value)
        return pos

    def _take(self, value: int) -> None:
        """A varint field's value: check it and choose what comes next."""
        phase = self.phase
        if phase == LENGTH:
            if value < MIN_RECORD_BODY:
                self._fail(f"invalid record length {value}")
                return
            self.length = self.left = value
            self.phase = ATTRIBUTES
        elif phase == TIMESTAMP:
            timestamp = (self.base_timestamp + value) & UINT64_MASK  # wraps, as in C
            self.timestamp = timestamp - (1 << 64) if timestamp > INT64_MAX else timestamp
            self.max_timestamp = max(self.max_timestamp, self.timestamp)
            self.phase = OFFSET
        elif phase == OFFSET:
            if self.strict and value != self.records:
                self._fail(f"offset delta {value}, expected {self.records} (the record's index)")
                return
            self.phase = KEY_LENGTH
        elif phase == KEY_LENGTH:
            self._take_key_length(value)
        elif phase == HEADER_COUNT:
            self._take_header_count(value)
        elif phase == HEADER_KEY_LENGTH and value < 0:
            self._fail(f"invalid negative header key size {value}")
        else:  # VALUE_LENGTH, HEADER_KEY_LENGTH, HEADER_VALUE_LENGTH
            self._start_field(value, NEXT_FIELD[phase])

    def _take_key_length(self, value: int) -> None:
        """One record error per record, the key's first (Kafka's order), then the key."""
        if value < 0 and self.need_keys:
            self._add_error(KEY_MISSING)
        elif self.timestamp != NO_TIMESTAMP and not self.low <= self.timestamp <= self.high:
            self._add_error(TIMESTAMP_OUT_OF_RANGE)
        if 0 <= value <= self.left and self._keys is not None:
            self._start_key_copy(value)
        self._start_field(value, KEY)

    def _take_header_count(self, value: int) -> None:
        if value < 0 or value > self.left:
            self._fail(f"invalid number of record headers {value}")
            return
        self.headers = value
        self.phase = HEADER_KEY_LENGTH
        if value == 0:
            self._end_record()

    def _start_key_copy(self, length: int) -> None:
        """Copy the next key as the walk passes it, or, past the budget, stop copying and drop
        the keys copied so far."""
        keys = self._keys
        need = self._key_bytes + length + (len(keys) + 1) * KEY_SPAN_COST
        if need > self._key_budget:
            self._keys = None
            return
        self._key_bytes += length
        self._key = bytearray()

    def _start_field(self, length: int, field: int) -> None:
        """``length`` bytes of ``field`` (-1: null) follow: check they fit the record."""
        if length < -1 or length > self.left:
            self._fail(f"{FIELD_NAMES[field]} length {length} does not fit in the "
                       f"{self.left} bytes left of the record")
            return
        self.phase = field
        self.skip = max(length, 0)
        if not self.skip:
            self._end_field()

    def _end_field(self) -> None:
        """A key, value or header key / value has been passed: what comes after it."""
        phase = self.phase
        if phase == KEY:
            if self._key is not None:
                self._keys.append(bytes(self._key))
                self._key = None
            self.phase = VALUE_LENGTH
        elif phase == VALUE:
            self.phase = HEADER_COUNT
        elif phase == HEADER_KEY:
            if self.utf8 != UTF8_OK:
                self._fail("a header key ends inside a UTF-8 sequence")
                return
            self.phase = HEADER_VALUE_LENGTH
        else:  # HEADER_VALUE
            self.headers -= 1
            if self.headers > 0:
                self.phase = HEADER_KEY_LENGTH
            else:
                self._end_record()

    def _end_record(self) -> None:
        if self.left != 0:
            self._fail(f"expected to read {self.length} bytes in record payload, but read "
                       f"{self.length - self.left}")
            return
        self.records += 1
        self.phase = DONE if self.records == self.count else LENGTH

    def _add_error(self, kind: int) -> None:
        self.error_count += 1
        self.timestamp_errors += kind == TIMESTAMP_OUT_OF_RANGE
        if len(self._errors) < MAX_RECORD_ERRORS:
            self._errors.append((self.records, kind, self.timestamp))

    def _fail(self, reason: str) -> None:
        """Why the records are malformed, naming the record."""
        self._failure = f"record {self.records}: {reason}"
        self.phase = FAILED


# The RecordBatch v2 header fields batch_keys reads (the layout: record_batch.py)
KEY_SCAN_FIELDS = struct.Struct(">8xi9xh34xi")  # batchLength, attributes, recordCount
RECORDS_AT = KEY_SCAN_FIELDS.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes batchLength does not count
CODEC_MASK = 0x07


def record_keys(records: bytes | bytearray | memoryview, count: int) -> list[bytes]:
    """The non-null keys of ``count`` records in a v2 records region, in order (stored
    batches: their offset deltas are not checked). ValueError when malformed."""
    walk = RecordWalk(count, 0, key_budget=INT64_MAX, strict=False)
    if not (walk.feed(records) and walk.finish()):
        raise ValueError(walk.failure)
    return walk.keys or []


def batch_keys(batch: bytes | bytearray | memoryview) -> list[bytes] | None:
    """The non-null keys of an uncompressed v2 batch; None when its records are compressed
    (the caller decompresses them and calls record_keys). ValueError when malformed."""
    view = memoryview(batch).cast("B")
    if len(view) < RECORDS_AT:
        raise ValueError("batch shorter than its header")
    batch_length, attributes, count = KEY_SCAN_FIELDS.unpack_from(view)
    end = LOG_OVERHEAD + batch_length
    if end < RECORDS_AT or end > len(view) or count < 0:
        raise ValueError("batch length / record count do not fit the batch")
    if attributes & CODEC_MASK:
        return None
    return record_keys(view[RECORDS_AT:end], count)
