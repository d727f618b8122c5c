/* The C form of BodyFormat.keys, for the CommitLog walker (follow in engine/_commit_log.c).
 *
 * The engine treats a body as opaque; the body's owner (protocol/_record_keys.c for Kafka
 * batches) may export a scanner as a PyCapsule named BODY_SCANNER_CAPSULE. The walker calls it
 * on every body with the GIL released, so an index that follows the CommitLog needs the GIL
 * only for the keys it finds, not for each entry. The interface lives in native/, in neither
 * layer, so that protocol/ includes nothing of engine/.
 */
#ifndef COMMITGATE_BODY_SCANNER_H
#define COMMITGATE_BODY_SCANNER_H

#include <Python.h>
#include <stdint.h>

#define BODY_SCANNER_CAPSULE "commitgate.body_scanner"

typedef struct {
    Py_ssize_t at, length; /* a key's bytes, as offsets into the scanned buffer */
} KeySpan;

typedef struct {
    KeySpan *spans; /* grown with PyMem_RawRealloc, freed with PyMem_RawFree by the caller */
    Py_ssize_t count, capacity;
} KeySpans;

enum { SCAN_DONE = 0, SCAN_NEEDS_PYTHON = 1, SCAN_FAILED = -1 };

/* Append the spans of the body's non-null keys to *out. SCAN_NEEDS_PYTHON: the body must go
 * through BodyFormat.keys (compressed records); SCAN_FAILED: malformed or out of memory (the
 * Python path reports it). Must not touch Python objects: it runs without the GIL. */
typedef int (*body_scan_fn)(const uint8_t *body, Py_ssize_t length, KeySpans *out);

#endif
