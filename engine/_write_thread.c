/* WriteThread: a POSIX thread that makes the pwrites handed to it, never touching the GIL.
 *
 * The ConsumeQueueWriter hands pages of units to it so that the appending thread never waits
 * in a queue-file pwrite (see engine/consume_queue_writer.py). A Python thread doing the same
 * took the GIL for every page, and each hand-off cost the appending thread: 64 KiB appends
 * fell from 2,957 to 1,633 MB/s. Here the bytes are copied at submit (a page, 4 KiB), the
 * writes run on the thread with no Python object in reach, and outcomes are collected by
 * polling finished(); wait() blocks (GIL released) until the thread is idle.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    int fd;
    long long offset;
    size_t length;
    const uint8_t *data;
} Chunk;

typedef struct Job {
    struct Job *next;
    long long id;
    int error; /* 0, or the errno of the first write that failed */
    Py_ssize_t count;
    Chunk chunks[]; /* then the chunks' bytes, in the same allocation */
} Job;

typedef struct {
    PyObject_HEAD
    pthread_t thread;
    int running, stopping, busy;
    pthread_mutex_t lock;
    pthread_cond_t wake; /* a job was queued, or stop */
    pthread_cond_t idle; /* nothing queued and nothing being written */
    Job *queued, *queued_tail;
    Job *done, *done_tail;
} WriteThread;

static void push(Job **head, Job **tail, Job *job)
{
    job->next = NULL;
    if (*tail)
        (*tail)->next = job;
    else
        *head = job;
    *tail = job;
}

/* pwrite all of a chunk, resuming after a short write; 0 or an errno (no progress: ENOSPC). */
static int write_chunk(const Chunk *c)
{
    size_t done = 0;
    while (done < c->length) {
        ssize_t n = pwrite(c->fd, c->data + done, c->length - done, (off_t)(c->offset + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n == 0 ? ENOSPC : errno;
        done += (size_t)n;
    }
    return 0;
}

static void *run(void *arg)
{
    WriteThread *self = arg;
    pthread_mutex_lock(&self->lock);
    for (;;) {
        while (self->queued == NULL && !self->stopping)
            pthread_cond_wait(&self->wake, &self->lock);
        if (self->queued == NULL)
            break; /* stopping, and everything queued is written */
        Job *job = self->queued;
        self->queued = job->next;
        if (self->queued == NULL)
            self->queued_tail = NULL;
        self->busy = 1;
        pthread_mutex_unlock(&self->lock);
        for (Py_ssize_t i = 0; i < job->count && job->error == 0; i++)
            job->error = write_chunk(&job->chunks[i]);
        pthread_mutex_lock(&self->lock);
        self->busy = 0;
        push(&self->done, &self->done_tail, job);
        if (self->queued == NULL)
            pthread_cond_broadcast(&self->idle);
    }
    pthread_cond_broadcast(&self->idle);
    pthread_mutex_unlock(&self->lock);
    return NULL;
}

static void free_jobs(Job *job)
{
    while (job) {
        Job *next = job->next;
        PyMem_RawFree(job);
        job = next;
    }
}

static PyObject *thread_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0))
        return PyErr_Format(PyExc_TypeError, "WriteThread() takes no arguments");
    WriteThread *self = (WriteThread *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    pthread_mutex_init(&self->lock, NULL);
    pthread_cond_init(&self->wake, NULL);
    pthread_cond_init(&self->idle, NULL);
    int error = pthread_create(&self->thread, NULL, run, self);
    if (error) {
        Py_DECREF(self);
        errno = error;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    self->running = 1;
    return (PyObject *)self;
}

/* Wait (GIL released) until nothing is queued or being written. */
static void wait_idle(WriteThread *self)
{
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->lock);
    while (self->running && (self->queued != NULL || self->busy))
        pthread_cond_wait(&self->idle, &self->lock);
    pthread_mutex_unlock(&self->lock);
    Py_END_ALLOW_THREADS
}

static void stop(WriteThread *self)
{
    if (!self->running)
        return;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&self->lock);
    self->stopping = 1;
    pthread_cond_signal(&self->wake);
    pthread_mutex_unlock(&self->lock);
    pthread_join(self->thread, NULL);
    Py_END_ALLOW_THREADS
    self->running = 0;
}

static void thread_dealloc(WriteThread *self)
{
    stop(self);
    free_jobs(self->queued);
    free_jobs(self->done);
    pthread_cond_destroy(&self->idle);
    pthread_cond_destroy(&self->wake);
    pthread_mutex_destroy(&self->lock);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* submit(job_id, chunks): chunks is a list of (fd, offset, bytes-like); the bytes are copied. */
static PyObject *thread_submit(WriteThread *self, PyObject *args)
{
    long long id;
    PyObject *chunks;
    if (!PyArg_ParseTuple(args, "LO!", &id, &PyList_Type, &chunks))
        return NULL;
    if (!self->running)
        return PyErr_Format(PyExc_ValueError, "the write thread is stopped");
    Py_ssize_t count = PyList_GET_SIZE(chunks);
    Py_buffer *views = PyMem_Calloc((size_t)count + 1, sizeof(Py_buffer));
    int *fds = PyMem_Calloc((size_t)count + 1, sizeof(int));
    long long *offsets = PyMem_Calloc((size_t)count + 1, sizeof(long long));
    Py_ssize_t parsed = 0, total = 0;
    PyObject *result = NULL;
    Job *job = NULL;
    if (views == NULL || fds == NULL || offsets == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; parsed < count; parsed++) {
        PyObject *item = PyList_GET_ITEM(chunks, parsed);
        if (!PyArg_ParseTuple(item, "iLy*", &fds[parsed], &offsets[parsed], &views[parsed]))
            goto done;
        total += views[parsed].len;
    }
    job = PyMem_RawMalloc(sizeof(Job) + (size_t)count * sizeof(Chunk) + (size_t)total);
    if (job == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    job->id = id;
    job->error = 0;
    job->count = count;
    uint8_t *data = (uint8_t *)&job->chunks[count];
    for (Py_ssize_t i = 0; i < count; i++) {
        memcpy(data, views[i].buf, (size_t)views[i].len);
        job->chunks[i] = (Chunk){fds[i], offsets[i], (size_t)views[i].len, data};
        data += views[i].len;
    }
    pthread_mutex_lock(&self->lock);
    push(&self->queued, &self->queued_tail, job);
    pthread_cond_signal(&self->wake);
    pthread_mutex_unlock(&self->lock);
    result = Py_NewRef(Py_None);
done:
    for (Py_ssize_t i = 0; i < parsed; i++)
        PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(fds);
    PyMem_Free(offsets);
    return result;
}

/* finished() -> [(job_id, errno)] of the jobs written since the last call, in order. */
static PyObject *thread_finished(WriteThread *self, PyObject *unused)
{
    pthread_mutex_lock(&self->lock);
    Job *done = self->done;
    self->done = self->done_tail = NULL;
    pthread_mutex_unlock(&self->lock);
    PyObject *list = PyList_New(0);
    for (Job *job = done; list != NULL && job != NULL; job = job->next) {
        PyObject *item = Py_BuildValue("Li", job->id, job->error);
        if (item == NULL || PyList_Append(list, item) < 0)
            Py_CLEAR(list);
        Py_XDECREF(item);
    }
    free_jobs(done);
    return list;
}

static PyObject *thread_wait(WriteThread *self, PyObject *unused)
{
    wait_idle(self);
    Py_RETURN_NONE;
}

static PyObject *thread_close(WriteThread *self, PyObject *unused)
{
    stop(self);
    Py_RETURN_NONE;
}

static PyMethodDef thread_methods[] = {
    {"submit", (PyCFunction)thread_submit, METH_VARARGS,
     "submit(job_id, [(fd, offset, bytes-like), ...]): copy the chunks and queue their writes"},
    {"finished", (PyCFunction)thread_finished, METH_NOARGS,
     "finished() -> [(job_id, errno)]: jobs written since the last call (errno 0: all written)"},
    {"wait", (PyCFunction)thread_wait, METH_NOARGS,
     "wait(): block, without the GIL, until every queued job is written"},
    {"close", (PyCFunction)thread_close, METH_NOARGS,
     "close(): write what is queued, then end the thread"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject WriteThreadType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "engine._write_thread.WriteThread",
    .tp_basicsize = sizeof(WriteThread),
    .tp_dealloc = (destructor)thread_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A thread that makes the pwrites handed to it without the GIL.",
    .tp_methods = thread_methods,
    .tp_new = thread_new,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "engine._write_thread",
    "A background thread for pwrites, without the GIL (the ConsumeQueueWriter's).", -1, NULL,
};

PyMODINIT_FUNC PyInit__write_thread(void)
{
    if (PyType_Ready(&WriteThreadType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddObjectRef(m, "WriteThread", (PyObject *)&WriteThreadType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
