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
 * and the payload and header bytes follow unchanged (same order in both).
 *
 * vsr_render: the other way, for polls of that generation (the twin of
 * adapters/iggy/render.py _vsr_batches): stored records become VSR batches,
 * one per run of records sharing an append timestamp whose origin timestamps
 * fit u32 deltas from the run's first. The XXH3-64 comes from core._speedups
 * (a capsule), so the hash is looked up once per process. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_speedups_le.h"

typedef uint64_t (*xxh3_fn)(const void *data, size_t len);
static xxh3_fn xxh3_64 = NULL;

#define FRAME 48  /* VSR_FRAME_HEADER */
#define BATCH 256 /* VSR_BATCH_HEADER: u64 partition, base offset, timestamp, origin, total, checksum; u32 count; 204 zero */
#define STORED 64 /* core.record RECORD_HEADER_SIZE */


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

/* Write one VSR batch of the `n` stored records at `in` (sizes in `sizes`)
 * at `o`; returns the bytes written. `scratch` holds 44 + 8n bytes. */
static size_t
write_batch(unsigned char *o, const unsigned char *in, const Py_ssize_t *sizes, Py_ssize_t n,
            uint64_t partition_id, uint64_t ts, uint64_t origin, unsigned char *scratch)
{
    uint64_t base = rd64(in + 24);
    unsigned char *f = o + BATCH;
    unsigned char *sums = scratch + 44;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t rec_origin = rd64(in + 40);
        if (!rec_origin)
            rec_origin = rd64(in + 32);
        uint32_t hlen = rd32(in + 48), plen = rd32(in + 52);
        memcpy(f + 8, in + 8, 16); /* id lo, id hi */
        wr32(f + 24, (uint32_t)(rd64(in + 24) - base));
        wr32(f + 28, (uint32_t)(rec_origin - origin));
        wr32(f + 32, hlen);
        wr32(f + 36, plen);
        wr64(f + 40, 0);
        memcpy(f + FRAME, in + STORED, (size_t)plen + hlen);
        uint64_t sum = xxh3_64(f + 8, FRAME - 8 + (size_t)plen + hlen);
        wr64(f, sum);
        wr64(sums + 8 * i, sum);
        f += FRAME + (size_t)plen + hlen;
        in += sizes[i];
    }
    uint64_t total = (uint64_t)(f - o);
    wr64(scratch, partition_id);
    wr64(scratch + 8, base);
    wr64(scratch + 16, ts);
    wr64(scratch + 24, origin);
    wr64(scratch + 32, total);
    wr32(scratch + 40, (uint32_t)n);
    memset(o, 0, BATCH);
    memcpy(o, scratch, 40);
    wr64(o + 40, xxh3_64(scratch, 44 + 8 * (size_t)n));
    wr32(o + 48, (uint32_t)n);
    return (size_t)total;
}

/* vsr_render(prefix, records, sizes, partition_id) -> bytes
 * `records`: stored records back to back, `sizes` their lengths (a list);
 * the reply body is `prefix` then the VSR batches. */
static PyObject *
vsr_render(PyObject *self, PyObject *args)
{
    Py_buffer pre, rec;
    PyObject *sizes_list;
    unsigned long long partition_id;
    if (!PyArg_ParseTuple(args, "y*y*O!K", &pre, &rec, &PyList_Type, &sizes_list, &partition_id))
        return NULL;
    PyObject *out = NULL;
    Py_ssize_t n = PyList_GET_SIZE(sizes_list);
    Py_ssize_t *sizes = PyMem_Malloc(sizeof(Py_ssize_t) * (n ? n : 1));
    unsigned char *scratch = PyMem_Malloc(44 + 8 * (size_t)n);
    if (sizes == NULL || scratch == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* Check the records frame exactly (a stored read always does; a bug must not overrun). */
    size_t at = 0, len = (size_t)rec.len;
    for (Py_ssize_t i = 0; i < n; i++) {
        sizes[i] = PyLong_AsSsize_t(PyList_GET_ITEM(sizes_list, i));
        if (sizes[i] == -1 && PyErr_Occurred())
            goto done;
        const unsigned char *r = (const unsigned char *)rec.buf + at;
        if (sizes[i] < STORED || len - at < (size_t)sizes[i]
            || (size_t)sizes[i] != STORED + (size_t)rd32(r + 48) + rd32(r + 52)) {
            PyErr_SetString(PyExc_ValueError, "vsr_render: records do not match their sizes");
            goto done;
        }
        at += (size_t)sizes[i];
    }
    if (at != len) {
        PyErr_SetString(PyExc_ValueError, "vsr_render: bytes after the last record");
        goto done;
    }
    /* Upper bound: every record its own batch (each loses 16 header bytes, gains a batch header). */
    size_t cap = (size_t)pre.len + len + (size_t)n * BATCH;
    out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)cap);
    if (out == NULL)
        goto done;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    memcpy(o, pre.buf, (size_t)pre.len);
    size_t w = (size_t)pre.len;
    const unsigned char *in = (const unsigned char *)rec.buf, *run_in = in;
    Py_ssize_t run_start = 0;
    uint64_t ts0 = 0, first = 0, maxo = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t ts = rd64(in + 32), origin = rd64(in + 40);
        if (!origin)
            origin = ts;
        if (i > run_start && (ts != ts0 || origin < first || origin - first > 0xFFFFFFFFULL
                              || (maxo > origin && maxo - origin > 0xFFFFFFFFULL))) {
            w += write_batch(o + w, run_in, sizes + run_start, i - run_start, partition_id, ts0, first, scratch);
            run_start = i;
            run_in = in;
        }
        if (i == run_start) {
            ts0 = ts;
            first = maxo = origin;
        } else if (origin > maxo) {
            maxo = origin;
        }
        in += sizes[i];
    }
    if (n > run_start)
        w += write_batch(o + w, run_in, sizes + run_start, n - run_start, partition_id, ts0, first, scratch);
    if (_PyBytes_Resize(&out, (Py_ssize_t)w) < 0)
        out = NULL;
done:
    PyMem_Free(sizes);
    PyMem_Free(scratch);
    PyBuffer_Release(&pre);
    PyBuffer_Release(&rec);
    return out;
}

static PyMethodDef methods[] = {
    {"vsr_frames", vsr_frames, METH_VARARGS, "Re-head an apache-iggy 0.9 send batch into stored records."},
    {"vsr_render", vsr_render, METH_VARARGS, "Stored records as the VSR batches of an apache-iggy 0.9 poll."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speedups", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    if (ferry_require_little_endian("adapters.iggy._speedups") < 0)
        return NULL;
    PyObject *core = PyImport_ImportModule("core._speedups"); /* PyCapsule_Import only walks attributes */
    if (core == NULL)
        return NULL;
    Py_DECREF(core);
    xxh3_64 = (xxh3_fn)PyCapsule_Import("core._speedups.xxh3_64_capsule", 0);
    if (xxh3_64 == NULL)
        return NULL; /* ImportError or AttributeError: the Python loops run */
    return PyModule_Create(&module);
}
