/* Keys of a RecordBatch v2's records, without building record objects.
 *
 * The IndexBuilder needs only each record's key; decoding whole records in Python (or through a
 * reader that copies every value) cost the appending thread as much as the append itself. This
 * walks the records region once: length, attributes, timestamp delta, offset delta, key length,
 * then jumps to the next record by its length. Null keys cost no allocation.
 *
 * The walk runs without the GIL: it only records where the keys are (spans), and the bytes
 * objects are made after taking the GIL back. A batch read long after it was written misses
 * the CPU cache on every record header; without the GIL that wait no longer holds up the
 * appending thread, which needs the GIL between its system calls.
 *
 * Record layout (varints are zigzag-encoded):
 *   length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
 *   keyLength varint | key | valueLength varint | value | headerCount varint | headers
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "engine/body_scanner.h" /* the engine's CommitLog walker calls scan_batch directly */

/* RecordBatch v2 header fields the scan needs (offsets from the batch start). */
#define BATCH_LENGTH_AT 8
#define ATTRIBUTES_AT 21
#define RECORD_COUNT_AT 57
#define RECORDS_AT 61
#define LOG_OVERHEAD 12 /* baseOffset + batchLength: bytes batchLength does not count */
#define CODEC_MASK 0x07

typedef struct {
    KeySpans keys;
    Py_ssize_t bad_record; /* the record that failed, with what was wrong */
    const char *error;
} Scan;

/* Read one zigzag varint (up to 10 bytes) at *pos; -1 on a truncated or overlong varint. */
static int read_varint(const uint8_t *buf, Py_ssize_t end, Py_ssize_t *pos, int64_t *out)
{
    uint64_t value = 0;
    int shift = 0;
    while (*pos < end && shift < 64) {
        uint8_t byte = buf[(*pos)++];
        value |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) {
            *out = (int64_t)(value >> 1) ^ -(int64_t)(value & 1);
            return 0;
        }
        shift += 7;
    }
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

static int fail(Scan *scan, Py_ssize_t record, const char *what)
{
    scan->bad_record = record;
    scan->error = what;
    return -1;
}

/* The spans of the non-null keys of ``count`` records in buf[start:end], as offsets into buf.
 * Touches no Python object, so it runs with the GIL released. */
static int scan_records(const uint8_t *buf, Py_ssize_t start, Py_ssize_t end, Py_ssize_t count,
                        Scan *scan)
{
    Py_ssize_t pos = start;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t length, skipped, key_length;
        if (read_varint(buf, end, &pos, &length) < 0 || length < 1 || length > end - pos)
            return fail(scan, i, "bad record length");
        Py_ssize_t record_end = pos + (Py_ssize_t)length;
        pos++; /* attributes */
        if (read_varint(buf, record_end, &pos, &skipped) < 0 ||
            read_varint(buf, record_end, &pos, &skipped) < 0 ||
            read_varint(buf, record_end, &pos, &key_length) < 0)
            return fail(scan, i, "truncated record header");
        if (key_length > record_end - pos || key_length < -1)
            return fail(scan, i, "bad key length");
        if (key_length >= 0 && add_span(&scan->keys, pos, (Py_ssize_t)key_length) < 0)
            return fail(scan, i, "out of memory");
        pos = record_end;
    }
    return 0;
}

/* Scan buf[start:end] without the GIL, then build the list of keys with it. */
static PyObject *keys_of(const uint8_t *buf, Py_ssize_t start, Py_ssize_t end, Py_ssize_t count)
{
    Scan scan = {{NULL, 0, 0}, 0, NULL};
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = scan_records(buf, start, end, count, &scan);
    Py_END_ALLOW_THREADS
    PyObject *keys = NULL;
    if (status < 0) {
        PyErr_Format(PyExc_ValueError, "record %zd: %s", scan.bad_record, scan.error);
        goto done;
    }
    keys = PyList_New(scan.keys.count);
    if (keys == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < scan.keys.count; i++) {
        PyObject *key = PyBytes_FromStringAndSize((const char *)buf + scan.keys.spans[i].at,
                                                  scan.keys.spans[i].length);
        if (key == NULL) {
            Py_CLEAR(keys);
            goto done;
        }
        PyList_SET_ITEM(keys, i, key);
    }
done:
    PyMem_RawFree(scan.keys.spans);
    return keys;
}

static int32_t big_endian_32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
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
    *end = LOG_OVERHEAD + (Py_ssize_t)big_endian_32(buf + BATCH_LENGTH_AT);
    *count = big_endian_32(buf + RECORD_COUNT_AT);
    if (*end < RECORDS_AT || *end > length || *count < 0) {
        *error = "batch length / record count do not fit the batch";
        return SCAN_FAILED;
    }
    return (buf[ATTRIBUTES_AT + 1] & CODEC_MASK) ? SCAN_NEEDS_PYTHON : SCAN_DONE;
}

/* body_scan_fn (engine/body_scanner.h): the walker's view of a Kafka batch. */
static int scan_batch(const uint8_t *body, Py_ssize_t length, KeySpans *out)
{
    Py_ssize_t end, count;
    const char *error;
    int status = batch_records(body, length, &end, &count, &error);
    if (status != SCAN_DONE)
        return status;
    Scan scan = {*out, 0, NULL};
    status = scan_records(body, RECORDS_AT, end, count, &scan);
    *out = scan.keys;
    return status < 0 ? SCAN_FAILED : SCAN_DONE;
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
    "Key extraction from Kafka v2 records without decoding them.", -1, methods,
};

PyMODINIT_FUNC PyInit__record_keys(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    PyObject *scanner = PyCapsule_New((void *)scan_batch, BODY_SCANNER_CAPSULE, NULL);
    if (scanner == NULL || PyModule_AddObject(m, "BODY_SCANNER", scanner) < 0) {
        Py_XDECREF(scanner);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
