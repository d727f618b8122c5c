/* The IndexBuilder's walk over CommitLog entries, without the GIL.
 *
 * Walking entries in Python cost the IndexBuilder about 5 us of GIL-held work per entry, and it
 * could rarely get the GIL while the appending thread held it between its system calls: with
 * the index on, 64 KiB appends ran at 60% of their speed without it, the process at 1.2 cores
 * of 2. Here the entries of a stretch of one segment are checked and their bodies handed to the
 * body owner's scanner (engine/body_scanner.h) with the GIL released; the GIL is taken back only
 * to build the entries that have keys (or need the Python path), usually none.
 *
 * Entry layout: see engine/commit_log.py (big-endian; the fields read here are named below).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "engine/body_scanner.h"

#define MESSAGE_MAGIC 0x43474D31u
#define BLANK_MAGIC 0x43474231u
#define MAGIC_AT 4
#define QUEUEID_AT 12
#define PHYSICALOFFSET_AT 28
#define STORETIMESTAMP_AT 56
#define BODY_LENGTH_AT 84
#define PREFIX_SIZE 88
#define BLANK_SIZE 8

enum { STOP_LIMIT = 0, STOP_BLANK = 1, STOP_INVALID = 2 };

typedef struct {
    Py_ssize_t at, size;           /* the entry's position in the buffer and TOTALSIZE */
    Py_ssize_t topic_at, topic_len;
    Py_ssize_t first_key, end_key; /* its keys in the span list; first_key < 0: Python path */
} Found;

typedef struct {
    Found *items;
    Py_ssize_t count, capacity;
} FoundList;

static uint64_t be(const uint8_t *p, int bytes)
{
    uint64_t value = 0;
    for (int i = 0; i < bytes; i++)
        value = value << 8 | p[i];
    return value;
}

static int add_found(FoundList *list, Found item)
{
    if (list->count == list->capacity) {
        Py_ssize_t capacity = list->capacity ? list->capacity * 2 : 16;
        Found *grown = PyMem_RawRealloc(list->items, (size_t)capacity * sizeof(Found));
        if (grown == NULL)
            return -1;
        list->items = grown;
        list->capacity = capacity;
    }
    list->items[list->count++] = item;
    return 0;
}

/* The entry at buf[pos]: its TOTALSIZE, or 0 if it is not a whole valid message entry below
 * limit; *topic_at / *topic_len locate its TOPIC. Mirrors CommitLog._decode_message. */
static Py_ssize_t message_size(const uint8_t *buf, Py_ssize_t pos, Py_ssize_t limit,
                               int64_t phy, Py_ssize_t *topic_at, Py_ssize_t *topic_len)
{
    const uint8_t *e = buf + pos;
    Py_ssize_t total = (int32_t)be(e, 4);
    if (be(e + MAGIC_AT, 4) != MESSAGE_MAGIC || total <= PREFIX_SIZE || total > limit - pos)
        return 0;
    Py_ssize_t body_len = (int32_t)be(e + BODY_LENGTH_AT, 4);
    if ((int64_t)be(e + PHYSICALOFFSET_AT, 8) != phy || body_len < 0 ||
        body_len > total - PREFIX_SIZE - 2)
        return 0;
    Py_ssize_t t = PREFIX_SIZE + body_len;
    Py_ssize_t tlen = (Py_ssize_t)be(e + t, 2);
    Py_ssize_t props = t + 2 + tlen;
    if (props + 2 > total || props + 2 + (Py_ssize_t)be(e + props, 2) != total)
        return 0;
    *topic_at = pos + t + 2;
    *topic_len = tlen;
    return total;
}

/* walk(segment, pos, limit, base_phy, scanner) -> (end, stop, found)
 *
 * Walks the entries of ``segment`` (a buffer: one CommitLog segment's mapping, which is
 * ``base_phy`` in the CommitLog) from ``pos`` while they end at or below ``limit``. ``end``: the
 * position after the last entry walked; ``stop``: 0 at the limit, 1 at a BLANK filler, 2 at an
 * invalid entry. ``found``: (position, size, partition, store timestamp, topic bytes, keys) of
 * the entries with keys, keys None for those the scanner left to the Python path. */
static PyObject *walk(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, limit;
    long long base_phy;
    PyObject *capsule;
    if (!PyArg_ParseTuple(args, "y*nnLO", &view, &pos, &limit, &base_phy, &capsule))
        return NULL;
    body_scan_fn scan = (body_scan_fn)PyCapsule_GetPointer(capsule, BODY_SCANNER_CAPSULE);
    if (scan == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    if (pos < 0 || limit > view.len || pos > limit) {
        PyBuffer_Release(&view);
        return PyErr_Format(PyExc_ValueError, "walk from %zd to %zd outside a %zd-byte segment",
                            pos, limit, view.len);
    }
    const uint8_t *buf = view.buf;
    KeySpans spans = {NULL, 0, 0};
    FoundList found = {NULL, 0, 0};
    int stop = STOP_LIMIT, failed = 0;

    Py_BEGIN_ALLOW_THREADS
    while (pos + BLANK_SIZE <= limit) {
        if (be(buf + pos + MAGIC_AT, 4) == BLANK_MAGIC) {
            stop = STOP_BLANK;
            break;
        }
        Py_ssize_t topic_at, topic_len;
        Py_ssize_t size = message_size(buf, pos, limit, base_phy + pos, &topic_at, &topic_len);
        if (size == 0) {
            /* A whole entry that ends past the limit is left for the next walk. */
            Py_ssize_t total = (int32_t)be(buf + pos, 4);
            if (be(buf + pos + MAGIC_AT, 4) != MESSAGE_MAGIC || total <= PREFIX_SIZE ||
                total <= limit - pos)
                stop = STOP_INVALID;
            break;
        }
        Py_ssize_t body_at = pos + PREFIX_SIZE;
        Py_ssize_t first = spans.count;
        KeySpans body_spans = spans;
        int status = scan(buf + body_at, topic_at - 2 - body_at, &body_spans);
        spans = body_spans;
        Found item = {pos, size, topic_at, topic_len, first, spans.count};
        if (status != SCAN_DONE) {
            spans.count = first; /* a failed scan's partial keys are dropped */
            item.first_key = item.end_key = -1;
        }
        if ((item.first_key < 0 || item.end_key > first) && add_found(&found, item) < 0) {
            failed = 1;
            break;
        }
        pos += size;
    }
    Py_END_ALLOW_THREADS

    PyObject *result = NULL, *list = NULL;
    if (failed) {
        PyErr_NoMemory();
        goto done;
    }
    list = PyList_New(found.count);
    if (list == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < found.count; i++) {
        Found *f = &found.items[i];
        /* Key spans are offsets into the body; the body starts PREFIX_SIZE into the entry. */
        const uint8_t *body = buf + f->at + PREFIX_SIZE;
        PyObject *keys;
        if (f->first_key < 0) {
            keys = Py_NewRef(Py_None);
        } else {
            keys = PyList_New(f->end_key - f->first_key);
            for (Py_ssize_t k = f->first_key; keys != NULL && k < f->end_key; k++) {
                PyObject *key = PyBytes_FromStringAndSize(
                    (const char *)body + spans.spans[k].at, spans.spans[k].length);
                if (key == NULL)
                    Py_CLEAR(keys);
                else
                    PyList_SET_ITEM(keys, k - f->first_key, key);
            }
        }
        PyObject *item = keys == NULL ? NULL : Py_BuildValue(
            "nnlLy#N", f->at, f->size, (long)(int32_t)be(buf + f->at + QUEUEID_AT, 4),
            (long long)(int64_t)be(buf + f->at + STORETIMESTAMP_AT, 8),
            (const char *)buf + f->topic_at, f->topic_len, keys);
        if (item == NULL) {
            Py_CLEAR(list);
            goto done;
        }
        PyList_SET_ITEM(list, i, item);
    }
    result = Py_BuildValue("niN", pos, stop, list);
done:
    PyMem_RawFree(spans.spans);
    PyMem_RawFree(found.items);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS,
     "walk(segment, pos, limit, base_phy, scanner) -> (end, stop, found): CommitLog entries "
     "scanned for keys without the GIL"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "engine._commit_log_walk",
    "The IndexBuilder's CommitLog walk, without the GIL.", -1, methods,
};

PyMODINIT_FUNC PyInit__commit_log_walk(void)
{
    return PyModule_Create(&module);
}
