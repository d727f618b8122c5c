/* The CommitLog's C helpers: the appender's entry write and the IndexBuilder's walk (follow).
 *
 * write_entry: packing the 88-byte prefix with struct, then handing Python tuples to
 * os.pwritev through two Python frames, cost a 64 KiB append about 1.5 us of GIL-held work
 * beside the copy itself; here the prefix is built on the stack and the pwritev runs without
 * the GIL.
 *
 * follow: walking entries in Python cost the IndexBuilder about 5 us of GIL-held work per entry,
 * and it could rarely get the GIL while the appending thread held it between its system calls:
 * with the index on, 64 KiB appends ran at 60% of their speed without it, the process at 1.2
 * cores of 2. Here the entries of a stretch of one segment are checked and their bodies handed
 * to the body owner's scanner (native/body_scanner.h) with the GIL released; the GIL is taken
 * back only to build the entries that have keys (or need the Python path), usually none.
 *
 * Entry layout: see engine/commit_log.py (big-endian; the fields used here are named below).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdint.h>
#include <sys/uio.h>
#include <time.h>

#include "big_endian.h"
#include "body_scanner.h"

#define MESSAGE_MAGIC 0x43474D31u
#define BLANK_MAGIC 0x43474231u
#define MAGIC_AT 4
#define BODYCRC_AT 8
#define QUEUEID_AT 12
#define FLAG_AT 16
#define QUEUEOFFSET_AT 20
#define PHYSICALOFFSET_AT 28
#define SYSFLAG_AT 36
#define BORNTIMESTAMP_AT 40
#define BORNHOST_AT 48
#define STORETIMESTAMP_AT 56
#define STOREHOST_AT 64
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

/* The integer arguments of write_entry, in order after its buffers (see its comment). */
enum { W_FD, W_POS, W_LIMIT, W_PHY, W_CRC, W_PARTITION, W_COUNT, W_QUEUE_OFFSET, W_SYS_FLAG,
       W_MAX_TIMESTAMP, W_BORN_HOST, W_STORE_TIMESTAMP, W_STORE_HOST, W_INTEGERS };

/* pwritev all of iov at pos, resuming after a short write; -1 with errno set on failure (a
 * write that makes no progress is a full disk). */
static Py_ssize_t write_all(int fd, struct iovec *iov, int count, int64_t pos, Py_ssize_t total)
{
    Py_ssize_t done = 0;
    while (done < total) {
        ssize_t n = pwritev(fd, iov, count, pos + done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0)
                errno = ENOSPC;
            return -1;
        }
        done += n;
        while (count > 0 && (size_t)n >= iov->iov_len) {
            n -= (ssize_t)iov->iov_len;
            iov++;
            count--;
        }
        if (count > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + n;
            iov->iov_len -= (size_t)n;
        }
    }
    return done;
}

/* write_entry(body, trailer, fd, pos, limit, phy, crc, partition, count, queue_offset,
 *             sys_flag, max_timestamp, born_host, store_timestamp, store_host) -> None
 *
 * Writes one message entry (prefix, ``body``, ``trailer``: TOPIC and PROPERTIES) at ``pos`` of
 * the segment file ``fd``, which is ``phy`` in the CommitLog and ``limit`` bytes long, in one
 * pwritev without the GIL. Raises OSError when the write fails (a short write that cannot
 * go on is ENOSPC). */
static PyObject *write_entry(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 + W_INTEGERS)
        return PyErr_Format(PyExc_TypeError, "write_entry takes %d arguments, got %zd",
                            2 + W_INTEGERS, nargs);
    long long v[W_INTEGERS];
    for (int i = 0; i < W_INTEGERS; i++) {
        v[i] = PyLong_AsLongLong(args[2 + i]);
        if (v[i] == -1 && PyErr_Occurred())
            return NULL;
    }
    Py_buffer body, trailer;
    if (PyObject_GetBuffer(args[0], &body, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[1], &trailer, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&body);
        return NULL;
    }
    Py_ssize_t total = PREFIX_SIZE + body.len + trailer.len;
    PyObject *result = NULL;
    if (body.len > INT32_MAX - PREFIX_SIZE - trailer.len || v[W_POS] < 0 ||
        v[W_POS] + total > v[W_LIMIT]) {
        PyErr_Format(PyExc_ValueError, "entry of %zd bytes at %lld passes the segment end %lld",
                     total, v[W_POS], v[W_LIMIT]);
        goto done;
    }
    uint8_t prefix[PREFIX_SIZE] = {0}; /* RECONSUMETIMES and PREPARED_TX_OFFSET stay 0 */
    put_be(prefix, (uint64_t)total, 4);
    put_be(prefix + MAGIC_AT, MESSAGE_MAGIC, 4);
    put_be(prefix + BODYCRC_AT, (uint64_t)v[W_CRC], 4);
    put_be(prefix + QUEUEID_AT, (uint64_t)v[W_PARTITION], 4);
    put_be(prefix + FLAG_AT, (uint64_t)v[W_COUNT], 4);
    put_be(prefix + QUEUEOFFSET_AT, (uint64_t)v[W_QUEUE_OFFSET], 8);
    put_be(prefix + PHYSICALOFFSET_AT, (uint64_t)v[W_PHY], 8);
    put_be(prefix + SYSFLAG_AT, (uint64_t)v[W_SYS_FLAG], 4);
    put_be(prefix + BORNTIMESTAMP_AT, (uint64_t)v[W_MAX_TIMESTAMP], 8);
    put_be(prefix + BORNHOST_AT, (uint64_t)v[W_BORN_HOST], 8);
    put_be(prefix + STORETIMESTAMP_AT, (uint64_t)v[W_STORE_TIMESTAMP], 8);
    put_be(prefix + STOREHOST_AT, (uint64_t)v[W_STORE_HOST], 8);
    put_be(prefix + BODY_LENGTH_AT, (uint64_t)body.len, 4);
    struct iovec iov[3] = {
        {prefix, PREFIX_SIZE}, {body.buf, (size_t)body.len}, {trailer.buf, (size_t)trailer.len}};
    Py_ssize_t written;
    int error;
    Py_BEGIN_ALLOW_THREADS
    written = write_all((int)v[W_FD], iov, 3, v[W_POS], total);
    error = errno;
    Py_END_ALLOW_THREADS
    if (written < 0) {
        errno = error;
        PyErr_SetFromErrno(PyExc_OSError); /* the caller names the file */
        goto done;
    }
    result = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&trailer);
    PyBuffer_Release(&body);
    return result;
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

/* Walks entries from *pos while they end at or below limit (no GIL needed): keys go to spans,
 * entries with keys (or for the Python path) to found; *stop says why it ended. -1: no memory. */
static int walk_range(const uint8_t *buf, Py_ssize_t *pos_io, Py_ssize_t limit, int64_t base_phy,
                      body_scan_fn scan, KeySpans *spans_io, FoundList *found_io, int *stop_out)
{
    Py_ssize_t pos = *pos_io;
    KeySpans spans = *spans_io;
    FoundList found = *found_io;
    int stop = STOP_LIMIT, failed = 0;
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
    *pos_io = pos;
    *spans_io = spans;
    *found_io = found;
    *stop_out = stop;
    return failed ? -1 : 0;
}

/* follow's (end, stop, found), from what walk_range gathered; NULL on error. */
static PyObject *walk_result(const uint8_t *buf, Py_ssize_t pos, int stop, int failed,
                             const FoundList *found_list, const KeySpans *key_spans)
{
    FoundList found = *found_list;
    KeySpans spans = *key_spans;
    PyObject *list = NULL;
    if (failed) {
        PyErr_NoMemory();
        return NULL;
    }
    list = PyList_New(found.count);
    if (list == NULL)
        return NULL;
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
            return NULL;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return Py_BuildValue("niN", pos, stop, list);
}

/* follow(segment, pos, base_phy, scanner, dispatched, control, poll_us, budget_us)
 *     -> (end, stop, found)
 *
 * Walks the entries of ``segment`` (a buffer: one CommitLog segment's mapping, which is
 * ``base_phy`` in the CommitLog) from ``pos`` without the GIL, keeping up with the appends: it
 * reads how far the CommitLog is dispatched from ``dispatched`` (an int64 cell the Dispatcher
 * writes after every append), walks to there and sleeps ``poll_us`` when caught up. It returns
 * once it has found entries with keys (or for the Python path), at a BLANK filler, the
 * segment's end or an entry it cannot walk, after ``budget_us``, or when ``control[0]`` is
 * set. Where a stretch had no keys it publishes the next position to index in ``control[1]``.
 * ``end``: the position after the last entry walked; ``stop``: 0 at the limit, 1 at a BLANK
 * filler, 2 at an invalid entry; ``found``: (position, size, partition, store timestamp, topic
 * bytes, keys) of the entries with keys, keys None for those the scanner left to the Python
 * path. Taking the GIL back after every walk and poll cost the appending thread ~90 GIL waits
 * per 512 MiB of 64 KiB appends (see docs/performance.md, fifth session). */
static PyObject *follow(PyObject *self, PyObject *args)
{
    Py_buffer view, dispatched, control;
    Py_ssize_t pos;
    long long base_phy, poll_us, budget_us;
    PyObject *capsule;
    if (!PyArg_ParseTuple(args, "y*nLOw*w*LL", &view, &pos, &base_phy, &capsule, &dispatched,
                          &control, &poll_us, &budget_us))
        return NULL;
    PyObject *result = NULL;
    body_scan_fn scan = (body_scan_fn)PyCapsule_GetPointer(capsule, BODY_SCANNER_CAPSULE);
    if (scan == NULL)
        goto release;
    if (pos < 0 || pos > view.len) {
        PyErr_Format(PyExc_ValueError, "follow from %zd outside a %zd-byte segment", pos,
                     view.len);
        goto release;
    }
    if (dispatched.len < 8 || control.len < 16 || poll_us <= 0) {
        PyErr_SetString(PyExc_ValueError, "follow: bad cells or poll interval");
        goto release;
    }
    const uint8_t *buf = view.buf;
    int64_t *end_cell = dispatched.buf, *cells = control.buf;
    KeySpans spans = {NULL, 0, 0};
    FoundList found = {NULL, 0, 0};
    int stop = STOP_LIMIT, failed = 0;

    Py_BEGIN_ALLOW_THREADS
    struct timespec now, nap = {(time_t)(poll_us / 1000000), (long)(poll_us % 1000000) * 1000};
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t deadline = (int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000 + budget_us;
    while (pos < view.len) {
        int64_t limit = __atomic_load_n(end_cell, __ATOMIC_ACQUIRE) - base_phy;
        if (limit > view.len)
            limit = view.len;
        if (limit > pos) {
            Py_ssize_t before = pos;
            failed = walk_range(buf, &pos, (Py_ssize_t)limit, base_phy, scan, &spans, &found,
                                &stop) < 0;
            if (failed || found.count > 0 || stop != STOP_LIMIT || pos == before)
                break;
            __atomic_store_n(&cells[1], base_phy + pos, __ATOMIC_RELEASE);
            continue;
        }
        if (__atomic_load_n(&cells[0], __ATOMIC_ACQUIRE))
            break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000 >= deadline)
            break;
        nanosleep(&nap, NULL);
    }
    Py_END_ALLOW_THREADS

    result = walk_result(buf, pos, stop, failed, &found, &spans);
    PyMem_RawFree(spans.spans);
    PyMem_RawFree(found.items);
release:
    PyBuffer_Release(&control);
    PyBuffer_Release(&dispatched);
    PyBuffer_Release(&view);
    return result;
}

static PyMethodDef methods[] = {
    {"write_entry", (PyCFunction)(void (*)(void))write_entry, METH_FASTCALL,
     "write_entry(body, trailer, fd, pos, limit, phy, crc, partition, count, queue_offset, "
     "sys_flag, max_timestamp, born_host, store_timestamp, store_host): one CommitLog "
     "entry in one pwritev without the GIL"},
    {"follow", follow, METH_VARARGS,
     "follow(segment, pos, base_phy, scanner, dispatched, control, poll_us, budget_us) -> "
     "(end, stop, found): walk that keeps up with the appends without the GIL"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "engine._commit_log",
    "The CommitLog's C helpers: the appender's entry write and the IndexBuilder's walk (follow).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__commit_log(void)
{
    return PyModule_Create(&module);
}
