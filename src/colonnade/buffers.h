/* Buffers the compiled passes take (colonnade/table/_strata.c, colonnade/encoding/_scan.c):
 * contiguous NumPy arrays or Arrow buffers, held through the buffer protocol while a pass runs
 * without the GIL. */

#ifndef COLONNADE_BUFFERS_H
#define COLONNADE_BUFFERS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef struct {
    Py_buffer view;
    int held;
} Buf;

/* Holds obj's buffer in b (writable if asked); TypeError unless its items are itemsize bytes
 * (0: any size). b is released by release() whether this succeeds or not. */
static int get_buf(PyObject *obj, Buf *b, int writable, Py_ssize_t itemsize, const char *name) {
    b->held = 0;
    if (PyObject_GetBuffer(obj, &b->view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    b->held = 1;
    if (itemsize && b->view.itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "%s: items of %zd bytes expected, got %zd", name, itemsize, b->view.itemsize);
        return -1;
    }
    return 0;
}

static void release(Buf *b) {
    if (b->held) {
        PyBuffer_Release(&b->view);
        b->held = 0;
    }
}

static Py_ssize_t count_of(const Buf *b) { return b->view.len / b->view.itemsize; }

#endif
