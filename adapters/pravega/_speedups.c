/* adapters.pravega._speedups: the compiled twin of the record loop of
 * adapters/pravega/reads.py _frames.
 *
 * Why: a Pravega read answers with the partition's byte view, one 8-byte event
 * frame header (type 0, length, both big-endian i32, pravega.md section 6) and
 * the payload per stored record; the Python loop (one unpack, a pack and two
 * list appends per record) was the largest part of a read's gateway time
 * (docs/pravega.md "Performance"). Optional like the other extensions
 * (setup.py); FERRY_PURE_PYTHON=1 or a missing build keeps the Python loop,
 * and tests/pravega/test_pravega_reads.py checks both give the same bytes.
 *
 * frames(chunks, need, framed) -> (bytes, got): the view of the records in
 * `chunks` (buffers of whole stored records back to back, core/record.py: a
 * 64-byte header with u32 H at 48 and u32 P at 52, then P payload bytes and H
 * header bytes), record by record until at least `need` bytes are made;
 * `framed` puts the frame header before each payload (the event view), else
 * payloads only (byte streams). `got` is the number of bytes made. A record
 * that does not fit its chunk raises ValueError (only a bug could make one). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_speedups_le.h"

#define HEAD 64

static void
wr32be(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* Bytes the view of one chunk's records takes, up to `need` (first pass). */
static int
measure(const unsigned char *b, Py_ssize_t len, Py_ssize_t need, int framed, Py_ssize_t *out, Py_ssize_t *took)
{
    Py_ssize_t pos = 0, got = 0;
    while (pos < len && got < need) {
        if (len - pos < HEAD)
            goto bad;
        uint32_t h = rd32(b + pos + 48), p = rd32(b + pos + 52);
        if ((uint64_t)len - (uint64_t)pos - HEAD < (uint64_t)h + p)
            goto bad;
        got += (framed ? 8 : 0) + (Py_ssize_t)p;
        pos += HEAD + (Py_ssize_t)p + (Py_ssize_t)h;
    }
    *out = got;
    *took = pos;
    return 0;
bad:
    PyErr_Format(PyExc_ValueError, "stored record at %zd does not fit its chunk of %zd bytes", pos, len);
    return -1;
}

static PyObject *
frames(PyObject *self, PyObject *args)
{
    PyObject *chunks;
    Py_ssize_t need;
    int framed;
    if (!PyArg_ParseTuple(args, "O!np", &PyList_Type, &chunks, &need, &framed))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(chunks), total = 0, left = need;
    Py_buffer *views = PyMem_Calloc(n ? n : 1, sizeof(Py_buffer));
    Py_ssize_t *took = PyMem_Calloc(n ? n : 1, sizeof(Py_ssize_t));
    Py_ssize_t used = 0;
    PyObject *result = NULL, *out = NULL;
    if (views == NULL || took == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; used < n && left > 0; used++) {
        if (PyObject_GetBuffer(PyList_GET_ITEM(chunks, used), &views[used], PyBUF_SIMPLE) < 0)
            goto done;
        Py_ssize_t got;
        if (measure(views[used].buf, views[used].len, left, framed, &got, &took[used]) < 0) {
            used++;
            goto done;
        }
        total += got;
        left -= got;
    }
    out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL)
        goto done;
    unsigned char *w = (unsigned char *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < used; i++) {
        const unsigned char *b = views[i].buf;
        Py_ssize_t pos = 0;
        while (pos < took[i]) {
            uint32_t h = rd32(b + pos + 48), p = rd32(b + pos + 52);
            if (framed) {
                wr32be(w, 0);
                wr32be(w + 4, p);
                w += 8;
            }
            memcpy(w, b + pos + HEAD, p);
            w += p;
            pos += HEAD + (Py_ssize_t)p + (Py_ssize_t)h;
        }
    }
    result = Py_BuildValue("Nn", out, total);
    out = NULL;
done:
    Py_XDECREF(out);
    if (views != NULL)
        for (Py_ssize_t i = 0; i < used; i++)
            if (views[i].obj != NULL)
                PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    PyMem_Free(took);
    return result;
}

static PyMethodDef methods[] = {
    {"frames", frames, METH_VARARGS, "The event-frame (or raw) view of stored records, at least `need` bytes."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speedups", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    if (ferry_require_little_endian("adapters.pravega._speedups") < 0)
        return NULL;
    return PyModule_Create(&module);
}
