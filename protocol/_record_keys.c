/* The records of a RecordBatch v2, walked in C: their keys, and their validation on produce.
 *
 * One walker reads the record fields as a byte-level state machine, so the same code serves a
 * contiguous records region (keys for the IndexBuilder; an uncompressed batch on produce) and a
 * compressed batch fed in decompressed chunks of any size (produce validation): a record may
 * straddle chunks and is never buffered, so validating a batch holds one chunk at a time.
 *
 * Keys: the IndexBuilder needs only each record's key; decoding whole records in Python cost the
 * appending thread as much as the append itself. The walk notes where the keys are (spans) and
 * the bytes objects are made after taking the GIL back. A batch read long after it was written
 * misses the CPU cache on every record header; without the GIL that wait no longer holds up the
 * appending thread. Validating a compressed batch can also copy its keys (a bounded amount) for
 * the IndexBuilder, which then need not decompress the batch a second time.
 *
 * Validation (Kafka's DefaultRecord.readFrom, DefaultRecordBatch's iterator and LogValidator):
 * every length fits its record, varints are at most 5 bytes and 32-bit (varlongs 10 bytes),
 * offset deltas are 0, 1, 2... (Kafka rewrites or tolerates others; CommitGate stores batches as
 * sent, so it refuses them), header keys are not null and are UTF-8 (Kafka does not check;
 * Python clients fail on others), each record consumes exactly its length,
 * the batch holds exactly the records its header claims and no byte follows the last one.
 * Per-record errors (KIP-467) are collected for records without a key (compacted topics) and
 * timestamps outside the topic's range; the walk goes on after them, as Kafka's does.
 *
 * Record layout (varints are zigzag-encoded):
 *   length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
 *   keyLength varint | key | valueLength varint | value | headerCount varint |
 *   (headerKeyLength varint | headerKey | headerValueLength varint | headerValue) * headerCount
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "big_endian.h"
#include "body_scanner.h" /* the engine's CommitLog walker calls scan_batch directly */

/* RecordBatch v2 header fields the scan needs (offsets from the batch start). */
#define BATCH_LENGTH_AT 8
#define ATTRIBUTES_AT 21
#define RECORD_COUNT_AT 57
#define RECORDS_AT 61
#define LOG_OVERHEAD 12 /* baseOffset + batchLength: bytes batchLength does not count */
#define CODEC_MASK 0x07
#define MIN_RECORD_BODY 6     /* attributes and five one-byte varints */
#define MAX_RECORD_ERRORS 1000 /* kept for the response; all are counted */
#define NO_TIMESTAMP (-1)
#define GIL_FREE_BYTES 65536 /* smaller feeds are not worth giving the GIL away */

enum { VARINT_DONE = 0, VARINT_WANTS_MORE = 1, VARINT_TOO_LONG = -1 };

/* The field the walk reads next. */
typedef enum {
    P_LENGTH, P_ATTRIBUTES, P_TIMESTAMP, P_OFFSET, P_KEY_LENGTH, P_KEY, P_VALUE_LENGTH, P_VALUE,
    P_HEADER_COUNT, P_HEADER_KEY_LENGTH, P_HEADER_KEY, P_HEADER_VALUE_LENGTH, P_HEADER_VALUE,
    P_DONE, P_FAILED,
} Phase;

enum { KEY_MISSING = 1, TIMESTAMP_OUT_OF_RANGE = 2 };

typedef struct {
    int64_t index, kind, timestamp;
} RecordError;

typedef struct {
    uint8_t *bytes; /* PyMem_Raw* */
    Py_ssize_t length, capacity;
} KeyBytes;

typedef struct {
    /* set by the caller */
    int64_t count;          /* records the batch header claims */
    int64_t base_timestamp;
    int64_t low, high;      /* record timestamps allowed (NO_TIMESTAMP always is) */
    int need_keys;          /* a record without a key is a record error (compacted topics) */
    int strict;             /* produce: offset deltas 0, 1, 2... (not so in compacted batches)
                               and header keys UTF-8 */
    int collect_spans;      /* note key spans (contiguous regions only) */
    Py_ssize_t key_budget;  /* copy the keys (fed in pieces): at most this many bytes of them and
                               their spans, else none; 0: do not copy */
    /* where the walk is */
    Phase phase;
    uint64_t varint;        /* a varint being read, possibly across feeds */
    int shift;
    int64_t length;         /* the current record's length */
    int64_t left;           /* bytes of the current record not read yet */
    int64_t skip;           /* bytes of a key, value or header still to pass */
    int64_t headers;        /* headers of the current record not read yet */
    int utf8;               /* UTF8_* state within a header key */
    int64_t records;        /* records complete */
    int64_t timestamp;      /* the current record's */
    int64_t max_timestamp;
    /* what it found */
    KeySpans keys;          /* spans into the caller's buffer, or into copied when copying */
    KeyBytes copied;        /* the copied keys' bytes, one after the other */
    int keys_not_copied;    /* not asked, or stopped at the budget: none kept */
    int64_t error_count;    /* record errors, including those not kept */
    int64_t timestamp_errors;
    Py_ssize_t kept;
    RecordError *errors;    /* the first MAX_RECORD_ERRORS, allocated at the first */
    char failure[200];      /* why the records are malformed, when phase == P_FAILED */
} Walk;

static void walk_init(Walk *w, int64_t count)
{
    memset(w, 0, sizeof *w);
    w->count = count;
    w->low = INT64_MIN;
    w->high = INT64_MAX;
    w->max_timestamp = NO_TIMESTAMP;
    w->phase = count > 0 ? P_LENGTH : P_DONE;
}

static void walk_free(Walk *w)
{
    PyMem_RawFree(w->keys.spans);
    PyMem_RawFree(w->errors);
    PyMem_RawFree(w->copied.bytes);
    w->keys = (KeySpans){0};
    w->copied = (KeyBytes){0};
    w->errors = NULL;
}

/* Record why the records are malformed, naming the record; always -1. */
static int fail(Walk *w, const char *format, ...)
{
    int n = snprintf(w->failure, sizeof w->failure, "record %lld: ", (long long)w->records);
    va_list args;
    va_start(args, format);
    vsnprintf(w->failure + n, sizeof w->failure - (size_t)n, format, args);
    va_end(args);
    w->phase = P_FAILED;
    return -1;
}

static int add_span(KeySpans *keys, Py_ssize_t at, Py_ssize_t length)
{
    if (keys->count == keys->capacity) {
        Py_ssize_t capacity = keys->capacity ? keys->capacity * 2 : 64;
        KeySpan *grown = PyMem_RawRealloc(keys->spans, (size_t)capacity * sizeof(KeySpan));
        if (grown == NULL)
            return -1;
        keys->spans = grown;
        keys->capacity = capacity;
    }
    keys->spans[keys->count++] = (KeySpan){at, length};
    return 0;
}

/* A key of ``length`` bytes starts (fed in pieces): make room to copy it as the walk passes it,
 * or, past the budget, stop copying and drop the keys copied so far. */
static int start_key_copy(Walk *w, int64_t length)
{
    KeyBytes *copied = &w->copied;
    Py_ssize_t need = copied->length + (Py_ssize_t)length;
    if (need + (w->keys.count + 1) * (Py_ssize_t)sizeof(KeySpan) > w->key_budget) {
        PyMem_RawFree(w->keys.spans);
        PyMem_RawFree(copied->bytes);
        w->keys = (KeySpans){0};
        *copied = (KeyBytes){0};
        w->key_budget = 0;
        w->keys_not_copied = 1;
        return 0;
    }
    if (copied->bytes == NULL || need > copied->capacity) {
        Py_ssize_t capacity = copied->capacity ? copied->capacity * 2 : 4096;
        capacity = capacity < need ? need : capacity;
        uint8_t *grown = PyMem_RawRealloc(copied->bytes, (size_t)capacity);
        if (grown == NULL)
            return -1;
        copied->bytes = grown;
        copied->capacity = capacity;
    }
    return add_span(&w->keys, copied->length, (Py_ssize_t)length);
}

static int add_record_error(Walk *w, int64_t kind, int64_t timestamp)
{
    w->error_count++;
    w->timestamp_errors += kind == TIMESTAMP_OUT_OF_RANGE;
    if (w->kept == MAX_RECORD_ERRORS)
        return 0;
    if (w->errors == NULL &&
        (w->errors = PyMem_RawMalloc(MAX_RECORD_ERRORS * sizeof(RecordError))) == NULL)
        return fail(w, "out of memory");
    w->errors[w->kept++] = (RecordError){w->records, kind, timestamp};
    return 0;
}

/* Header keys are strings: Java decodes bad UTF-8 with replacement characters, but Python
 * clients (aiokafka, kafka-python) fail on the batch, so they are checked, as a DFA that carries
 * its state across feeds. States: 0 complete; 1-3 continuation bytes still due; 4-7 the second
 * byte of a sequence whose first byte narrows its range (overlongs, surrogates, > U+10FFFF). */
enum { UTF8_OK = 0, UTF8_BAD = -1 };

static int utf8_step(int state, uint8_t byte)
{
    static const uint8_t low[8] = {0, 0x80, 0x80, 0x80, 0xA0, 0x80, 0x90, 0x80};
    static const uint8_t high[8] = {0, 0xBF, 0xBF, 0xBF, 0xBF, 0x9F, 0xBF, 0x8F};
    static const int8_t next[8] = {0, 0, 1, 2, 1, 1, 2, 2};
    if (state != UTF8_OK)
        return byte >= low[state] && byte <= high[state] ? next[state] : UTF8_BAD;
    if (byte < 0x80)
        return 0;
    if (byte >= 0xC2 && byte <= 0xDF)
        return 1;
    if (byte == 0xE0)
        return 4;
    if (byte == 0xED)
        return 5;
    if (byte >= 0xE1 && byte <= 0xEF)
        return 2;
    if (byte == 0xF0)
        return 6;
    if (byte >= 0xF1 && byte <= 0xF3)
        return 3;
    return byte == 0xF4 ? 7 : UTF8_BAD;
}

static int utf8_feed(Walk *w, const uint8_t *p, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++)
        if ((w->utf8 = utf8_step(w->utf8, p[i])) == UTF8_BAD)
            return fail(w, "a header key is not valid UTF-8");
    return 0;
}

/* Continue the varint in w->varint from buf[*pos:limit]: VARINT_DONE with the zigzag-decoded
 * value in *out, VARINT_WANTS_MORE when limit came first, VARINT_TOO_LONG past max_bytes. */
static int read_varint(Walk *w, const uint8_t *buf, Py_ssize_t limit, Py_ssize_t *pos,
                       int max_bytes, int64_t *out)
{
    while (*pos < limit) {
        uint8_t byte = buf[(*pos)++];
        w->varint |= (uint64_t)(byte & 0x7f) << w->shift;
        w->shift += 7;
        if (!(byte & 0x80)) {
            *out = (int64_t)(w->varint >> 1) ^ -(int64_t)(w->varint & 1);
            w->varint = 0;
            w->shift = 0;
            return VARINT_DONE;
        }
        if (w->shift >= 7 * max_bytes)
            return VARINT_TOO_LONG;
    }
    return VARINT_WANTS_MORE;
}

static int end_record(Walk *w)
{
    if (w->left != 0)
        return fail(w, "expected to read %lld bytes in record payload, but read %lld",
                    (long long)w->length, (long long)(w->length - w->left));
    w->records++;
    w->phase = w->records == w->count ? P_DONE : P_LENGTH;
    return 0;
}

/* A key, value or header key / value has been passed: what comes after it. */
static int end_field(Walk *w)
{
    switch (w->phase) {
    case P_KEY:
        w->phase = P_VALUE_LENGTH;
        return 0;
    case P_VALUE:
        w->phase = P_HEADER_COUNT;
        return 0;
    case P_HEADER_KEY:
        if (w->utf8 != UTF8_OK)
            return fail(w, "a header key ends inside a UTF-8 sequence");
        w->phase = P_HEADER_VALUE_LENGTH;
        return 0;
    default: /* P_HEADER_VALUE */
        if (--w->headers > 0) {
            w->phase = P_HEADER_KEY_LENGTH;
            return 0;
        }
        return end_record(w);
    }
}

/* ``length`` bytes of ``name`` (-1: null) follow: check they fit the record, then pass them. */
static int start_field(Walk *w, int64_t length, const char *name, Phase field)
{
    if (length < -1 || length > w->left)
        return fail(w, "%s length %lld does not fit in the %lld bytes left of the record", name,
                    (long long)length, (long long)w->left);
    w->phase = field;
    w->skip = length > 0 ? length : 0;
    return w->skip ? 0 : end_field(w);
}

/* A varint field's value, read in full: check it and choose what comes next. ``at`` is where
 * the bytes after it start, in the caller's buffer. */
static int take_value(Walk *w, int64_t value, Py_ssize_t at)
{
    switch (w->phase) {
    case P_LENGTH:
        if (value < MIN_RECORD_BODY)
            return fail(w, "invalid record length %lld", (long long)value);
        w->length = w->left = value;
        w->phase = P_ATTRIBUTES;
        return 0;
    case P_TIMESTAMP:
        w->timestamp = (int64_t)((uint64_t)w->base_timestamp + (uint64_t)value);
        if (w->timestamp > w->max_timestamp)
            w->max_timestamp = w->timestamp;
        w->phase = P_OFFSET;
        return 0;
    case P_OFFSET:
        if (w->strict && value != w->records)
            return fail(w, "offset delta %lld, expected %lld (the record's index)",
                        (long long)value, (long long)w->records);
        w->phase = P_KEY_LENGTH;
        return 0;
    case P_KEY_LENGTH:
        /* one error per record, the key's first (Kafka's order) */
        if (value < 0 && w->need_keys) {
            if (add_record_error(w, KEY_MISSING, w->timestamp) < 0)
                return -1;
        } else if (w->timestamp != NO_TIMESTAMP && (w->timestamp < w->low ||
                                                    w->timestamp > w->high)) {
            if (add_record_error(w, TIMESTAMP_OUT_OF_RANGE, w->timestamp) < 0)
                return -1;
        }
        if (value >= 0 && w->collect_spans && add_span(&w->keys, at, (Py_ssize_t)value) < 0)
            return fail(w, "out of memory");
        /* a length that does not fit fails in start_field */
        if (value >= 0 && value <= w->left && w->key_budget && start_key_copy(w, value) < 0)
            return fail(w, "out of memory");
        return start_field(w, value, "key", P_KEY);
    case P_VALUE_LENGTH:
        return start_field(w, value, "value", P_VALUE);
    case P_HEADER_COUNT:
        if (value < 0 || value > w->left)
            return fail(w, "invalid number of record headers %lld", (long long)value);
        w->headers = value;
        w->phase = P_HEADER_KEY_LENGTH;
        return value ? 0 : end_record(w);
    case P_HEADER_KEY_LENGTH:
        if (value < 0)
            return fail(w, "invalid negative header key size %lld", (long long)value);
        return start_field(w, value, "header key", P_HEADER_KEY);
    default: /* P_HEADER_VALUE_LENGTH */
        return start_field(w, value, "header value", P_HEADER_VALUE);
    }
}

/* Walk buf[0:len], the next bytes of the records region; ``origin`` is where buf starts in the
 * caller's buffer (for key spans). 0, or -1 with w->failure set. Touches no Python object. */
static int walk_feed(Walk *w, const uint8_t *buf, Py_ssize_t len, Py_ssize_t origin)
{
    Py_ssize_t pos = 0;
    while (pos < len && w->phase != P_FAILED) {
        Phase phase = w->phase;
        if (phase == P_DONE) {
            snprintf(w->failure, sizeof w->failure, "bytes follow the last of the %lld records "
                     "the batch header claims", (long long)w->count);
            w->phase = P_FAILED;
            break;
        }
        Py_ssize_t limit = phase == P_LENGTH || w->left >= len - pos ? len : pos + w->left;
        if (phase == P_KEY || phase == P_VALUE || phase == P_HEADER_KEY ||
            phase == P_HEADER_VALUE) {
            Py_ssize_t n = w->skip < limit - pos ? (Py_ssize_t)w->skip : limit - pos;
            if (phase == P_HEADER_KEY && w->strict && utf8_feed(w, buf + pos, n) < 0)
                break;
            if (phase == P_KEY && w->key_budget) {
                memcpy(w->copied.bytes + w->copied.length, buf + pos, (size_t)n);
                w->copied.length += n;
            }
            pos += n;
            w->skip -= n;
            w->left -= n;
            if (w->skip == 0)
                end_field(w);
            continue;
        }
        if (phase == P_ATTRIBUTES) { /* a record is at least MIN_RECORD_BODY long */
            if (w->strict && buf[pos] & 0x80) /* unused in v2; aiokafka reads them as a varint */
                return fail(w, "record attributes 0x%02x: the high bit must be clear", buf[pos]);
            pos++;
            w->left--;
            w->phase = P_TIMESTAMP;
            continue;
        }
        Py_ssize_t start = pos;
        int64_t value;
        int status = read_varint(w, buf, limit, &pos, phase == P_TIMESTAMP ? 10 : 5, &value);
        if (phase != P_LENGTH)
            w->left -= pos - start;
        if (status == VARINT_TOO_LONG)
            return fail(w, "a varint is longer than %d bytes", phase == P_TIMESTAMP ? 10 : 5);
        if (status == VARINT_WANTS_MORE) {
            if (phase != P_LENGTH && w->left == 0)
                return fail(w, "its fields run past its length %lld", (long long)w->length);
            break; /* pos == len: the field goes on in the next feed */
        }
        if (phase != P_TIMESTAMP && (value < INT32_MIN || value > INT32_MAX))
            return fail(w, "varint %lld is out of the 32-bit range", (long long)value);
        take_value(w, value, origin + pos);
    }
    return w->phase == P_FAILED ? -1 : 0;
}

/* After the last feed: the records ended where the batch says they do. */
static int walk_finish(Walk *w)
{
    if (w->phase == P_FAILED)
        return -1;
    if (w->phase == P_DONE)
        return 0;
    if (w->phase == P_LENGTH && w->shift == 0)
        snprintf(w->failure, sizeof w->failure, "the records end after %lld of the %lld records "
                 "the batch header claims", (long long)w->records, (long long)w->count);
    else
        snprintf(w->failure, sizeof w->failure, "record %lld is cut off by the end of the records",
                 (long long)w->records);
    w->phase = P_FAILED;
    return -1;
}

/* Walk a whole region, without the GIL when it is big enough to be worth it. */
static int walk_region(Walk *w, const uint8_t *buf, Py_ssize_t len, Py_ssize_t origin)
{
    int status;
    if (len < GIL_FREE_BYTES)
        return walk_feed(w, buf, len, origin);
    Py_BEGIN_ALLOW_THREADS
    status = walk_feed(w, buf, len, origin);
    Py_END_ALLOW_THREADS
    return status;
}

/* ---- keys --------------------------------------------------------------------------------- */

/* The keys the spans mark in buf, as a list of bytes. */
static PyObject *key_list(const uint8_t *buf, const KeySpans *spans)
{
    PyObject *keys = PyList_New(spans->count);
    for (Py_ssize_t i = 0; keys != NULL && i < spans->count; i++) {
        PyObject *key = PyBytes_FromStringAndSize((const char *)buf + spans->spans[i].at,
                                                  spans->spans[i].length);
        if (key == NULL)
            Py_CLEAR(keys);
        else
            PyList_SET_ITEM(keys, i, key);
    }
    return keys;
}

/* The non-null keys of ``count`` records in buf[start:end] (stored batches: offset deltas of a
 * compacted batch have gaps, so they are not checked). */
static PyObject *keys_of(const uint8_t *buf, Py_ssize_t start, Py_ssize_t end, Py_ssize_t count)
{
    Walk w;
    walk_init(&w, count);
    w.collect_spans = 1;
    PyObject *keys = NULL;
    if (walk_region(&w, buf + start, end - start, start) < 0 || walk_finish(&w) < 0) {
        PyErr_SetString(PyExc_ValueError, w.failure);
        goto done;
    }
    keys = key_list(buf, &w.keys);
done:
    walk_free(&w);
    return keys;
}

/* record_keys(records: bytes-like, count: int) -> list[bytes]: the non-null keys in order. */
static PyObject *record_keys(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "y*n", &view, &count))
        return NULL;
    PyObject *keys = keys_of(view.buf, 0, view.len, count);
    PyBuffer_Release(&view);
    return keys;
}

/* Where an uncompressed batch's records end and how many there are; SCAN_NEEDS_PYTHON for
 * compressed records, SCAN_FAILED (with *error set) for a header that does not fit. */
static int batch_records(const uint8_t *buf, Py_ssize_t length, Py_ssize_t *end,
                         Py_ssize_t *count, const char **error)
{
    if (length < RECORDS_AT) {
        *error = "batch shorter than its header";
        return SCAN_FAILED;
    }
    *end = LOG_OVERHEAD + (Py_ssize_t)(int32_t)be(buf + BATCH_LENGTH_AT, 4);
    *count = (int32_t)be(buf + RECORD_COUNT_AT, 4);
    if (*end < RECORDS_AT || *end > length || *count < 0) {
        *error = "batch length / record count do not fit the batch";
        return SCAN_FAILED;
    }
    return (buf[ATTRIBUTES_AT + 1] & CODEC_MASK) ? SCAN_NEEDS_PYTHON : SCAN_DONE;
}

/* body_scan_fn (native/body_scanner.h): the walker's view of a Kafka batch. */
static int scan_batch(const uint8_t *body, Py_ssize_t length, KeySpans *out)
{
    Py_ssize_t end, count;
    const char *error;
    int status = batch_records(body, length, &end, &count, &error);
    if (status != SCAN_DONE)
        return status;
    Walk w;
    walk_init(&w, count);
    w.collect_spans = 1;
    w.keys = *out;
    status = walk_feed(&w, body + RECORDS_AT, end - RECORDS_AT, RECORDS_AT) < 0 ||
             walk_finish(&w) < 0 ? SCAN_FAILED : SCAN_DONE;
    *out = w.keys;
    PyMem_RawFree(w.errors);
    return status;
}

/* batch_keys(batch: bytes-like) -> list[bytes] | None: the non-null keys of an uncompressed
 * RecordBatch v2, reading its header here; None when the records are compressed (the caller
 * decompresses them and calls record_keys). */
static PyObject *batch_keys(PyObject *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Py_ssize_t end, count;
    const char *error;
    PyObject *keys = NULL;
    switch (batch_records(view.buf, view.len, &end, &count, &error)) {
    case SCAN_DONE:
        keys = keys_of(view.buf, RECORDS_AT, end, count);
        break;
    case SCAN_NEEDS_PYTHON:
        keys = Py_NewRef(Py_None);
        break;
    default:
        PyErr_SetString(PyExc_ValueError, error);
    }
    PyBuffer_Release(&view);
    return keys;
}

/* ---- RecordWalk: produce validation, fed by the caller ------------------------------------ */

typedef struct {
    PyObject_HEAD
    Walk walk;
} RecordWalk;

static int RecordWalk_init(RecordWalk *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"count", "base_timestamp", "need_keys", "low", "high", "key_budget",
                            NULL};
    long long count, base_timestamp, low = INT64_MIN, high = INT64_MAX;
    int need_keys = 0;
    Py_ssize_t key_budget = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "LL|pLLn", names, &count, &base_timestamp,
                                     &need_keys, &low, &high, &key_budget))
        return -1;
    walk_free(&self->walk);
    walk_init(&self->walk, count);
    self->walk.base_timestamp = base_timestamp;
    self->walk.need_keys = need_keys;
    self->walk.strict = 1;
    self->walk.low = low;
    self->walk.high = high;
    self->walk.key_budget = key_budget > 0 ? key_budget : 0;
    self->walk.keys_not_copied = key_budget <= 0;
    return 0;
}

static void RecordWalk_dealloc(RecordWalk *self)
{
    walk_free(&self->walk);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *RecordWalk_feed(RecordWalk *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    int status = walk_region(&self->walk, view.buf, view.len, 0);
    PyBuffer_Release(&view);
    return PyBool_FromLong(status == 0);
}

static PyObject *RecordWalk_finish(RecordWalk *self, PyObject *unused)
{
    return PyBool_FromLong(walk_finish(&self->walk) == 0);
}

static PyObject *RecordWalk_failure(RecordWalk *self, void *closure)
{
    if (self->walk.phase != P_FAILED)
        Py_RETURN_NONE;
    return PyUnicode_DecodeUTF8(self->walk.failure, (Py_ssize_t)strlen(self->walk.failure),
                                "replace");
}

static PyObject *RecordWalk_record_errors(RecordWalk *self, void *closure)
{
    PyObject *list = PyList_New(self->walk.kept);
    for (Py_ssize_t i = 0; list != NULL && i < self->walk.kept; i++) {
        RecordError *e = &self->walk.errors[i];
        PyObject *item = Py_BuildValue("(LLL)", (long long)e->index, (long long)e->kind,
                                       (long long)e->timestamp);
        if (item == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, i, item);
    }
    return list;
}

static PyObject *RecordWalk_keys(RecordWalk *self, void *closure)
{
    if (self->walk.keys_not_copied || self->walk.phase != P_DONE)
        Py_RETURN_NONE;
    return key_list(self->walk.copied.bytes, &self->walk.keys);
}

static PyObject *RecordWalk_int(RecordWalk *self, void *closure)
{
    return PyLong_FromLongLong(*(int64_t *)((char *)&self->walk + (size_t)closure));
}

static PyMethodDef RecordWalk_methods[] = {
    {"feed", (PyCFunction)RecordWalk_feed, METH_O,
     "feed(data) -> bool: walk the next bytes of the records region; False once malformed"},
    {"finish", (PyCFunction)RecordWalk_finish, METH_NOARGS,
     "finish() -> bool: after the last feed, False unless exactly the claimed records were read"},
    {NULL, NULL, 0, NULL},
};

#define INT_FIELD(name, doc) \
    {#name, (getter)RecordWalk_int, NULL, doc, (void *)offsetof(Walk, name)}

static PyGetSetDef RecordWalk_getset[] = {
    {"failure", (getter)RecordWalk_failure, NULL, "why the records are malformed, or None", NULL},
    {"record_errors", (getter)RecordWalk_record_errors, NULL,
     "(record index, kind, timestamp) of the first record errors; kind 1: no key, 2: timestamp "
     "out of range", NULL},
    {"keys", (getter)RecordWalk_keys, NULL,
     "the non-null keys in order, copied when key_budget was given and they fit in it (with "
     "16 bytes a key); else None, or before the walk is done", NULL},
    INT_FIELD(records, "records read in full"),
    INT_FIELD(max_timestamp, "the newest record timestamp (-1 before any)"),
    INT_FIELD(error_count, "record errors found, including those not kept"),
    INT_FIELD(timestamp_errors, "record errors for timestamps out of range"),
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject RecordWalkType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "protocol._record_keys.RecordWalk",
    .tp_basicsize = sizeof(RecordWalk),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "RecordWalk(count, base_timestamp, need_keys=False, low=-2**63, high=2**63-1, "
              "key_budget=0): validates a v2 records region fed in chunks of any size",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)RecordWalk_init,
    .tp_dealloc = (destructor)RecordWalk_dealloc,
    .tp_methods = RecordWalk_methods,
    .tp_getset = RecordWalk_getset,
};

static PyMethodDef methods[] = {
    {"record_keys", record_keys, METH_VARARGS,
     "record_keys(records, count) -> list of the non-null keys of a v2 records region"},
    {"batch_keys", batch_keys, METH_O,
     "batch_keys(batch) -> list of the non-null keys of an uncompressed v2 batch, or None if "
     "its records are compressed"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "protocol._record_keys",
    "Keys and validation of Kafka v2 records without decoding them.", -1, methods,
};

PyMODINIT_FUNC PyInit__record_keys(void)
{
    if (PyType_Ready(&RecordWalkType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    PyObject *scanner = PyCapsule_New((void *)scan_batch, BODY_SCANNER_CAPSULE, NULL);
    if (scanner == NULL || PyModule_AddObject(m, "BODY_SCANNER", scanner) < 0 ||
        PyModule_AddObjectRef(m, "RecordWalk", (PyObject *)&RecordWalkType) < 0) {
        Py_XDECREF(scanner);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
