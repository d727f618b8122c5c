/* QueueCore: the part of a ConsumeQueue that every append touches (see engine/queue_core.py,
 * the same in Python, for the rules; this type must behave exactly like it).
 *
 * In Python, put() cost 520 ns with one partition and 770 ns with 10,000 partitions taken in
 * turn: beside the interpreter's work, the queue's offsets are int objects of their own, each
 * a cache miss when the partition has not been used for a while, and every new value frees the
 * old one (one more). Here the offsets are fields of the queue object and the units are packed
 * straight into the pending buffer (a bytearray, so Python code reads and writes it as before).
 * Drains and the start of a pending run stay in Python: put() calls the queue's drain() and
 * _start_pending() methods, a few times per PENDING_BYTES of units.
 *
 * pwrite_all() is QueueWriter's loop over many queues' writes (engine/queue_writer.py, the same
 * in Python there): all of them with the GIL released, so that two threads write in parallel.
 * tail_writes() prepares most of those writes (engine/queue_core.py, the same in Python): in
 * Python, preparing a queue's write took 2.3 us of a 10,000-queue drain's 6, its objects cold.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include "structmember.h"

#include "big_endian.h"

#define UNIT_SIZE 20

typedef struct {
    PyObject_HEAD
    long long min_offset, max_offset, pending_from, last_tags, max_phy_end;
    Py_ssize_t pending_limit;
    PyObject *pending; /* a bytearray: its first (max_offset - pending_from) units */
} QueueCore;

static PyTypeObject QueueCoreType;

static int call_method(QueueCore *self, const char *name, PyObject *arg)
{
    PyObject *result = arg == NULL ? PyObject_CallMethod((PyObject *)self, name, NULL)
                                   : PyObject_CallMethod((PyObject *)self, name, "O", arg);
    Py_XDECREF(result);
    return result == NULL ? -1 : 0;
}

/* The bytearray to write ``end`` bytes into: the pending one when it is long enough, else a new
 * one holding its first ``at`` bytes (never a resize: a view of the old one may be alive). */
static char *room(QueueCore *self, Py_ssize_t at, Py_ssize_t end)
{
    PyObject *pending = self->pending;
    if (pending == NULL || !PyByteArray_CheckExact(pending)) {
        PyErr_SetString(PyExc_TypeError, "QueueCore.pending must be a bytearray");
        return NULL;
    }
    if (end <= PyByteArray_GET_SIZE(pending))
        return PyByteArray_AS_STRING(pending);
    if (at > PyByteArray_GET_SIZE(pending)) {
        PyErr_Format(PyExc_ValueError, "pending buffer of %zd bytes has no unit at byte %zd",
                     PyByteArray_GET_SIZE(pending), at);
        return NULL;
    }
    PyObject *grown = PyByteArray_FromStringAndSize(NULL, end);
    if (grown == NULL)
        return NULL;
    memcpy(PyByteArray_AS_STRING(grown), PyByteArray_AS_STRING(pending), (size_t)at);
    Py_SETREF(self->pending, grown);
    return PyByteArray_AS_STRING(grown);
}

static const char *const PUT_ARGS[] = {"queue_offset", "count", "phy", "size", "timestamp"};
#define PUT_NARGS 5

/* put's arguments, by position or by name, as in Python. */
static int put_args(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, long long *v)
{
    PyObject *given[PUT_NARGS] = {NULL};
    Py_ssize_t named = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nargs > PUT_NARGS) {
        PyErr_Format(PyExc_TypeError, "put takes %d arguments, got %zd", PUT_NARGS, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++)
        given[i] = args[i];
    for (Py_ssize_t k = 0; k < named; k++) {
        const char *name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, k));
        int i = 0;
        while (name != NULL && i < PUT_NARGS && strcmp(name, PUT_ARGS[i]) != 0)
            i++;
        if (name == NULL || i == PUT_NARGS || given[i] != NULL) {
            PyErr_Format(PyExc_TypeError, "put got an unexpected or repeated argument %R",
                         PyTuple_GET_ITEM(kwnames, k));
            return -1;
        }
        given[i] = args[nargs + k];
    }
    for (int i = 0; i < PUT_NARGS; i++) {
        if (given[i] == NULL) {
            PyErr_Format(PyExc_TypeError, "put missing argument '%s'", PUT_ARGS[i]);
            return -1;
        }
        v[i] = PyLong_AsLongLong(given[i]);
        if (v[i] == -1 && PyErr_Occurred())
            return -1;
    }
    return 0;
}

/* put(queue_offset, count, phy, size, timestamp): ``count`` identical units for a batch at its
 * base offset, added to the pending ones. */
static PyObject *put(QueueCore *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    long long v[PUT_NARGS];
    if (put_args(args, nargs, kwnames, v) < 0)
        return NULL;
    long long queue_offset = v[0], count = v[1], phy = v[2], size = v[3], timestamp = v[4];
    if (count < 0 || count > PY_SSIZE_T_MAX / UNIT_SIZE / 2 || size < INT32_MIN ||
        size > INT32_MAX)
        return PyErr_Format(PyExc_ValueError, "no units for count %lld, size %lld", count,
                            size);
    if (queue_offset != self->max_offset) { /* a replayed batch over a gap */
        if (call_method(self, "drain", NULL) < 0)
            return NULL;
        self->pending_from = queue_offset;
    }
    long long units_before = queue_offset - self->pending_from;
    if (units_before < 0 || units_before > PY_SSIZE_T_MAX / UNIT_SIZE / 2)
        return PyErr_Format(PyExc_ValueError, "offset %lld is below the pending units from %lld",
                            queue_offset, self->pending_from);
    Py_ssize_t at = (Py_ssize_t)units_before * UNIT_SIZE;
    if (at == 0) {
        PyObject *offset = PyLong_FromLongLong(queue_offset);
        int failed = offset == NULL || call_method(self, "_start_pending", offset) < 0;
        Py_XDECREF(offset);
        if (failed)
            return NULL;
    }
    if (timestamp > self->last_tags)
        self->last_tags = timestamp;
    Py_ssize_t length = (Py_ssize_t)count * UNIT_SIZE, end = at + length;
    char *buffer = room(self, at, end);
    if (buffer == NULL)
        return NULL;
    if (length) {
        uint8_t *units = (uint8_t *)buffer + at;
        put_be(units, (uint64_t)phy, 8);
        put_be(units + 8, (uint64_t)size, 4);
        put_be(units + 12, (uint64_t)self->last_tags, 8);
        for (Py_ssize_t done = UNIT_SIZE; done < length; done *= 2) /* doubling copies */
            memcpy(units + done, units, (size_t)(done < length - done ? done : length - done));
    }
    self->max_offset = queue_offset + count;
    self->max_phy_end = phy + size;
    if (end >= self->pending_limit && call_method(self, "drain", NULL) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static void dealloc(QueueCore *self)
{
    Py_CLEAR(self->pending);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* One write as MappedFile.write_at makes it: a short write means a full disk. */
static int write_whole(int fd, const char *data, Py_ssize_t length, long long offset)
{
    ssize_t done;
    do {
        done = pwrite(fd, data, (size_t)length, (off_t)offset);
    } while (done < 0 && errno == EINTR);
    if (done < 0)
        return errno;
    return done == length ? 0 : ENOSPC;
}

typedef struct {
    int fd;
    long long offset;
    Py_buffer data;
} Write;

static int write_args(PyObject *fds, PyObject *buffers, PyObject *offsets, Py_ssize_t i,
                      Write *write)
{
    long fd = PyLong_AsLong(PySequence_Fast_GET_ITEM(fds, i));
    if (fd == -1 && PyErr_Occurred())
        return -1;
    write->offset = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(offsets, i));
    if (write->offset == -1 && PyErr_Occurred())
        return -1;
    if (fd < INT32_MIN || fd > INT32_MAX) { /* as os.pwritev; a bad one fails in pwrite */
        PyErr_Format(PyExc_OverflowError, "write %zd: descriptor %ld out of range", i, fd);
        return -1;
    }
    write->fd = (int)fd;
    return PyObject_GetBuffer(PySequence_Fast_GET_ITEM(buffers, i), &write->data, PyBUF_SIMPLE);
}

/* pwrite_all(fds, buffers, offsets): write each buffer at its offset of its descriptor, without
 * the GIL; a list of each write's errno (0: written whole). */
static PyObject *pwrite_all(PyObject *module, PyObject *args)
{
    PyObject *fds_arg, *buffers_arg, *offsets_arg, *result = NULL;
    if (!PyArg_ParseTuple(args, "OOO:pwrite_all", &fds_arg, &buffers_arg, &offsets_arg))
        return NULL;
    PyObject *fds = PySequence_Fast(fds_arg, "fds must be a sequence");
    PyObject *buffers = PySequence_Fast(buffers_arg, "buffers must be a sequence");
    PyObject *offsets = PySequence_Fast(offsets_arg, "offsets must be a sequence");
    Write *writes = NULL;
    int *errors = NULL;
    Py_ssize_t n = 0, ready = 0;
    if (fds == NULL || buffers == NULL || offsets == NULL)
        goto done;
    n = PySequence_Fast_GET_SIZE(fds);
    if (PySequence_Fast_GET_SIZE(buffers) != n || PySequence_Fast_GET_SIZE(offsets) != n) {
        PyErr_SetString(PyExc_ValueError, "fds, buffers and offsets differ in length");
        goto done;
    }
    writes = PyMem_Calloc((size_t)n + 1, sizeof(Write));
    errors = PyMem_Calloc((size_t)n + 1, sizeof(int));
    if (writes == NULL || errors == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; ready < n; ready++)
        if (write_args(fds, buffers, offsets, ready, &writes[ready]) < 0)
            goto done;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++)
        errors[i] = write_whole(writes[i].fd, writes[i].data.buf, writes[i].data.len,
                                writes[i].offset);
    Py_END_ALLOW_THREADS
    result = PyList_New(n);
    for (Py_ssize_t i = 0; result != NULL && i < n; i++) {
        PyObject *error = PyLong_FromLong(errors[i]);
        if (error == NULL)
            Py_CLEAR(result);
        else
            PyList_SET_ITEM(result, i, error);
    }
done:
    for (Py_ssize_t i = 0; i < ready; i++)
        PyBuffer_Release(&writes[i].data);
    PyMem_Free(writes);
    PyMem_Free(errors);
    Py_XDECREF(fds);
    Py_XDECREF(buffers);
    Py_XDECREF(offsets);
    return result;
}

static PyObject *str_file_bytes, *str_key, *str_fd; /* attribute names, interned */

static int long_attr(PyObject *object, PyObject *name, long long *value)
{
    PyObject *attr = PyObject_GetAttr(object, name);
    if (attr == NULL)
        return -1;
    *value = PyLong_AsLongLong(attr);
    Py_DECREF(attr);
    return *value == -1 && PyErr_Occurred() ? -1 : 0;
}

static int append_new(PyObject *list, PyObject *item)
{
    if (item == NULL)
        return -1;
    int failed = PyList_Append(list, item);
    Py_DECREF(item);
    return failed;
}

/* The write of one queue whose pending units all go to its file already open: appended to the
 * lists, its file pinned. 1 when done, 0 when the queue is not such a one, -1 on an error. */
static int tail_write(PyObject *queue, PyObject *open_files, PyObject *pinned, PyObject *fds,
                      PyObject *buffers, PyObject *offsets, PyObject *files)
{
    if (!PyObject_TypeCheck(queue, &QueueCoreType)) {
        PyErr_SetString(PyExc_TypeError, "tail_writes takes QueueCore objects");
        return -1;
    }
    QueueCore *core = (QueueCore *)queue;
    long long length = (core->max_offset - core->pending_from) * UNIT_SIZE, file_bytes, fd;
    if (length <= 0 || core->pending == NULL || !PyByteArray_CheckExact(core->pending)
        || length > PyByteArray_GET_SIZE(core->pending))
        return 0;
    if (long_attr(queue, str_file_bytes, &file_bytes) < 0)
        return -1;
    if (file_bytes <= 0)
        return 0;
    long long index = core->pending_from * UNIT_SIZE / file_bytes;
    long long at = core->pending_from * UNIT_SIZE % file_bytes;
    if (at + length > file_bytes)
        return 0;
    PyObject *key = PyObject_GetAttr(queue, str_key);
    if (key == NULL)
        return -1;
    PyObject *file_key = Py_BuildValue("(NL)", key, index);
    if (file_key == NULL)
        return -1;
    PyObject *mapped = PyDict_GetItemWithError(open_files, file_key); /* borrowed */
    Py_DECREF(file_key);
    if (mapped == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (long_attr(mapped, str_fd, &fd) < 0)
        return -1;
    if (fd < 0)
        return 0;
    PyObject *whole = PyMemoryView_FromObject(core->pending);
    if (whole == NULL)
        return -1;
    PyObject *view = PySequence_GetSlice(whole, 0, (Py_ssize_t)length);
    Py_DECREF(whole);
    if (PyList_Append(files, mapped) < 0 || PySet_Add(pinned, mapped) < 0) {
        Py_XDECREF(view);
        return -1;
    }
    if (append_new(buffers, view) < 0 || append_new(fds, PyLong_FromLongLong(fd)) < 0
        || append_new(offsets, PyLong_FromLongLong(at)) < 0)
        return -1;
    return 1;
}

/* tail_writes(queues, start, open_files, pinned, fds, buffers, offsets, files): see
 * engine/queue_core.py, the same in Python. */
static PyObject *tail_writes(PyObject *module, PyObject *args)
{
    PyObject *queues, *open_files, *pinned, *fds, *buffers, *offsets, *files;
    Py_ssize_t at;
    if (!PyArg_ParseTuple(args, "O!nO!O!O!O!O!O!:tail_writes", &PyList_Type, &queues, &at,
                          &PyDict_Type, &open_files, &PySet_Type, &pinned, &PyList_Type, &fds,
                          &PyList_Type, &buffers, &PyList_Type, &offsets, &PyList_Type, &files))
        return NULL;
    if (at < 0) {
        PyErr_SetString(PyExc_ValueError, "tail_writes: start must not be negative");
        return NULL;
    }
    for (; at < PyList_GET_SIZE(queues); at++) {
        int done = tail_write(PyList_GET_ITEM(queues, at), open_files, pinned, fds, buffers,
                              offsets, files);
        if (done < 0)
            return NULL;
        if (done == 0)
            break;
    }
    return PyLong_FromSsize_t(at);
}

static PyMethodDef module_methods[] = {
    {"pwrite_all", pwrite_all, METH_VARARGS,
     "pwrite_all(fds, buffers, offsets): write each buffer at its offset of its descriptor, "
     "all without the GIL; each write's errno (0: written whole, ENOSPC: short)"},
    {"tail_writes", tail_writes, METH_VARARGS,
     "tail_writes(queues, start, open_files, pinned, fds, buffers, offsets, files): the writes "
     "of the queues from queues[start] on whose pending units all go to their open last file, "
     "appended to the lists, their files pinned; returns the index of the first other queue"},
    {NULL, NULL, 0, NULL},
};

static PyMethodDef queue_methods[] = {
    {"put", (PyCFunction)(void (*)(void))put, METH_FASTCALL | METH_KEYWORDS,
     "put(queue_offset, count, phy, size, timestamp): count identical units for a batch at "
     "its base offset, added to the pending ones (drained at pending_limit bytes)"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef queue_members[] = {
    {"min_offset", T_LONGLONG, offsetof(QueueCore, min_offset), 0, "first stored entry"},
    {"max_offset", T_LONGLONG, offsetof(QueueCore, max_offset), 0, "next offset to assign"},
    {"pending_from", T_LONGLONG, offsetof(QueueCore, pending_from), 0,
     "first pending unit; == max_offset when none is pending"},
    {"last_tags", T_LONGLONG, offsetof(QueueCore, last_tags), 0, "tagsCode of the last unit"},
    {"max_phy_end", T_LONGLONG, offsetof(QueueCore, max_phy_end), 0,
     "end of the last batch's CommitLog entry"},
    {"pending_limit", T_PYSSIZET, offsetof(QueueCore, pending_limit), 0,
     "pending bytes at which put() drains"},
    {"pending", T_OBJECT_EX, offsetof(QueueCore, pending), 0,
     "bytearray starting with the pending units"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject QueueCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "engine._queue_core.QueueCore",
    .tp_doc = "A ConsumeQueue's offsets and pending units (see engine/queue_core.py).",
    .tp_basicsize = sizeof(QueueCore),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)dealloc,
    .tp_methods = queue_methods,
    .tp_members = queue_members,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "engine._queue_core",
    "QueueCore: a ConsumeQueue's offsets and pending units, packed by put() in C; pwrite_all "
    "for the QueueWriter.", -1, module_methods,
};

PyMODINIT_FUNC PyInit__queue_core(void)
{
    if (PyType_Ready(&QueueCoreType) < 0)
        return NULL;
    str_file_bytes = PyUnicode_InternFromString("file_bytes");
    str_key = PyUnicode_InternFromString("_key");
    str_fd = PyUnicode_InternFromString("_fd");
    if (str_file_bytes == NULL || str_key == NULL || str_fd == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "QueueCore", (PyObject *)&QueueCoreType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
