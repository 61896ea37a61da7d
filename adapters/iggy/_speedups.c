/* adapters.iggy._speedups: compiled twins of the Iggy wire loops that run once
 * per message (adapters/iggy/messages.py). Optional like core._speedups
 * (setup.py builds it where a C compiler is there); the Python loops stay and
 * give the same results and statuses (tests/iggy/test_iggy_speedups.py).
 *
 * vsr_frames: an apache-iggy 0.9 send (iggy-current.md 7.2, one VSR batch)
 * re-headed into the stored layout (core/record.py): each 48-byte frame header
 *   u64 checksum, u64 id lo, u64 id hi, u32 offset delta, u32 timestamp delta,
 *   u32 headers length H, u32 payload length P, u64 reserved
 * becomes the 64-byte stored header
 *   u64 0, u64 id lo, u64 id hi, u64 0, u64 0, u64 origin + delta, u32 H, u32 P, u64 0
 * and the payload and header bytes follow unchanged (same order in both). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define FRAME 48  /* VSR_FRAME_HEADER */
#define STORED 64 /* core.record RECORD_HEADER_SIZE */

static inline uint64_t rd64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint32_t rd32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline void wr64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static inline void wr32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }

/* vsr_frames(buf, pos, end, count, origin) -> (bytearray, payload_bytes) | (None, problem)
 * problem: "short" (a frame header cut off), "reserved", "past_end",
 * "trailing" (bytes after the last frame), "origin" (origin + delta past u64). */
static PyObject *
vsr_frames(PyObject *self, PyObject *args)
{
    PyObject *bufobj;
    Py_ssize_t start, end, count;
    unsigned long long origin;
    if (!PyArg_ParseTuple(args, "OnnnK", &bufobj, &start, &end, &count, &origin))
        return NULL;
    Py_buffer pb;
    if (PyObject_GetBuffer(bufobj, &pb, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL, *out = NULL;
    if (start < 0 || end > pb.len || start > end || count < 0) {
        PyErr_SetString(PyExc_ValueError, "vsr_frames: bad bounds");
        goto done;
    }
    /* First pass: check the framing (nothing is allocated for a bad batch). */
    const unsigned char *b = (const unsigned char *)pb.buf;
    size_t pos = (size_t)start, stop = (size_t)end;
    const char *problem = NULL;
    unsigned long long payload = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (stop - pos < FRAME) { problem = "short"; break; }
        const unsigned char *f = b + pos;
        if (rd64(f + 40)) { problem = "reserved"; break; }
        uint32_t hlen = rd32(f + 32), plen = rd32(f + 36);
        size_t next = pos + FRAME + (size_t)plen + (size_t)hlen;
        if (next > stop) { problem = "past_end"; break; }
        if (origin + rd32(f + 28) < origin) { problem = "origin"; break; }
        payload += plen;
        pos = next;
    }
    if (problem == NULL && pos != stop)
        problem = "trailing";
    if (problem != NULL) {
        result = Py_BuildValue("(Os)", Py_None, problem);
        goto done;
    }
    /* Second pass: write the stored headers and copy the bodies. */
    out = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)(stop - (size_t)start) + (STORED - FRAME) * count);
    if (out == NULL)
        goto done;
    unsigned char *o = (unsigned char *)PyByteArray_AS_STRING(out);
    pos = (size_t)start;
    for (Py_ssize_t i = 0; i < count; i++) {
        const unsigned char *f = b + pos;
        uint32_t hlen = rd32(f + 32), plen = rd32(f + 36);
        size_t body = (size_t)plen + (size_t)hlen;
        wr64(o, 0);
        memcpy(o + 8, f + 8, 16); /* id lo, id hi */
        wr64(o + 24, 0);
        wr64(o + 32, 0);
        wr64(o + 40, origin + rd32(f + 28));
        wr32(o + 48, hlen);
        wr32(o + 52, plen);
        wr64(o + 56, 0);
        memcpy(o + STORED, f + FRAME, body);
        o += STORED + body;
        pos += FRAME + body;
    }
    result = Py_BuildValue("(OK)", out, payload);
done:
    Py_XDECREF(out);
    PyBuffer_Release(&pb);
    return result;
}

static PyMethodDef methods[] = {
    {"vsr_frames", vsr_frames, METH_VARARGS, "Re-head an apache-iggy 0.9 send batch into stored records."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speedups", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    const uint16_t probe = 1;
    if (*(const unsigned char *)&probe != 1) {
        PyErr_SetString(PyExc_ImportError, "adapters.iggy._speedups needs a little-endian host");
        return NULL;
    }
    return PyModule_Create(&module);
}
