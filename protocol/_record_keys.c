/* Keys of a RecordBatch v2's records, without building record objects.
 *
 * The IndexBuilder needs only each record's key; decoding whole records in Python (or through a
 * reader that copies every value) cost the appending thread as much as the append itself. This
 * walks the records region once: length, attributes, timestamp delta, offset delta, key length,
 * then jumps to the next record by its length. Null keys cost no allocation.
 *
 * Record layout (varints are zigzag-encoded):
 *   length varint | attributes int8 | timestampDelta varlong | offsetDelta varint |
 *   keyLength varint | key | valueLength varint | value | headerCount varint | headers
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

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

static PyObject *malformed(Py_ssize_t record, const char *what)
{
    PyErr_Format(PyExc_ValueError, "record %zd: %s", record, what);
    return NULL;
}

/* record_keys(records: bytes-like, count: int) -> list[bytes]: the non-null keys in order. */
static PyObject *record_keys(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t count;
    if (!PyArg_ParseTuple(args, "y*n", &view, &count))
        return NULL;
    const uint8_t *buf = view.buf;
    Py_ssize_t end = view.len, pos = 0;
    PyObject *keys = PyList_New(0);
    if (keys == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t length, skipped, key_length;
        if (read_varint(buf, end, &pos, &length) < 0 || length < 1 || length > end - pos) {
            malformed(i, "bad record length");
            goto fail;
        }
        Py_ssize_t record_end = pos + (Py_ssize_t)length;
        pos++; /* attributes */
        if (read_varint(buf, record_end, &pos, &skipped) < 0 ||
            read_varint(buf, record_end, &pos, &skipped) < 0 ||
            read_varint(buf, record_end, &pos, &key_length) < 0) {
            malformed(i, "truncated record header");
            goto fail;
        }
        if (key_length > record_end - pos || key_length < -1) {
            malformed(i, "bad key length");
            goto fail;
        }
        if (key_length >= 0) {
            PyObject *key = PyBytes_FromStringAndSize((const char *)buf + pos, key_length);
            if (key == NULL || PyList_Append(keys, key) < 0) {
                Py_XDECREF(key);
                goto fail;
            }
            Py_DECREF(key);
        }
        pos = record_end;
    }
    PyBuffer_Release(&view);
    return keys;
fail:
    Py_XDECREF(keys);
    PyBuffer_Release(&view);
    return NULL;
}

static PyMethodDef methods[] = {
    {"record_keys", record_keys, METH_VARARGS,
     "record_keys(records, count) -> list of the non-null keys of a v2 records region"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "protocol._record_keys",
    "Key extraction from Kafka v2 records without decoding them.", -1, methods,
};

PyMODINIT_FUNC PyInit__record_keys(void)
{
    return PyModule_Create(&module);
}
