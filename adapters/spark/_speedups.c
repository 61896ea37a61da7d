/* adapters.spark._speedups: the compiled twin of the record loop of
 * adapters/spark/batches.py polled_to_batch.
 *
 * Why: that loop (one unpack, four slices and four list appends per record,
 * plus a walk over each header block) is ~0.8 us per record, the largest part
 * of a Spark batch read's Python time (docs/spark.md "Performance"). Here it
 * fills flat column buffers that Arrow wraps without copying
 * (pyarrow.Array.from_buffers). Optional like the other extensions
 * (setup.py); FERRY_PURE_PYTHON=1 or a missing build keeps the Python loop,
 * and tests/spark/test_spark_speedups.py checks both give the same batch.
 *
 * Input: `count` stored records (core/record.py: u64 checksum, u128 id,
 * u64 offset, u64 timestamp, u64 origin, u32 H, u32 P, u64 reserved, then P
 * payload bytes and an H-byte header block of TLV pairs: u8 kind, u32 length,
 * bytes for the key, the same for the value) from `pos`; records from offset
 * `end` on are not taken. A record or header block that does not frame
 * exactly raises ValueError (a poll reply is stored records, so only a bug
 * could make one). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_speedups_le.h"

#define HEAD 64
#define KIND_STRING 2 /* core.header_value.HeaderKind.STRING (seed 000's kind table) */


/* A growable byte buffer; its contents become one bytes object. */
typedef struct { char *p; size_t len, cap; } buf_t;

static int
put(buf_t *b, const void *src, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        char *p = PyMem_Realloc(b->p, cap);
        if (p == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
    return 0;
}

static int put32(buf_t *b, int32_t v) { return put(b, &v, 4); }

/* One `u8 kind, u32 length, bytes` item of a header block at *h, before hend:
 * its kind, bytes and length, and *h moved past it; -1 if it does not fit. */
static int
tlv_item(const unsigned char *b, size_t *h, size_t hend, unsigned char *kind, const unsigned char **data,
         uint32_t *len)
{
    if (hend - *h < 5)
        return -1;
    *kind = b[*h];
    *len = rd32(b + *h + 1);
    if ((size_t)*len > hend - *h - 5)
        return -1;
    *data = b + *h + 5;
    *h += 5 + (size_t)*len;
    return 0;
}

static PyObject *
as_bytes(buf_t *b)
{
    return PyBytes_FromStringAndSize(b->p ? b->p : "", (Py_ssize_t)b->len);
}

/* columns(body, pos, count, end) -> (n, offsets, stamps, id_hex, payload_offsets,
 *   payload_data, header_starts, key_offsets, key_data, kinds, value_offsets,
 *   value_data, typed)
 * offsets/stamps: n int64; id_hex: 32n ASCII (the u128 id, big-endian hex);
 * *_offsets: int32 Arrow offsets; header_starts: n+1 int32 into the header
 * pairs; kinds: one uint8 per pair; typed: list of (pair index, key kind) of
 * keys whose kind is not STRING (code 2). */
static PyObject *
columns(PyObject *self, PyObject *args)
{
    Py_buffer pb;
    Py_ssize_t pos, count;
    unsigned long long end_offset;
    if (!PyArg_ParseTuple(args, "y*nnK", &pb, &pos, &count, &end_offset))
        return NULL;
    static const char hex[] = "0123456789abcdef";
    buf_t offs = {0}, stamps = {0}, ids = {0}, poffs = {0}, pdata = {0}, hstarts = {0};
    buf_t koffs = {0}, kdata = {0}, kinds = {0}, voffs = {0}, vdata = {0};
    PyObject *typed = PyList_New(0), *result = NULL;
    const unsigned char *b = (const unsigned char *)pb.buf;
    size_t len = (size_t)pb.len, at = (size_t)pos;
    Py_ssize_t n = 0;
    int32_t pairs = 0;
    if (typed == NULL || pos < 0 || put32(&poffs, 0) || put32(&hstarts, 0) || put32(&koffs, 0) || put32(&voffs, 0))
        goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (at > len || len - at < HEAD)
            goto bad;
        const unsigned char *r = b + at;
        uint64_t off = rd64(r + 24), ts = rd64(r + 32);
        uint32_t hlen = rd32(r + 48), plen = rd32(r + 52);
        if (off >= end_offset)
            break;
        size_t p = at + HEAD, stop = p + (size_t)plen + hlen;
        if (stop > len)
            goto bad;
        char id[32];
        for (int k = 0; k < 16; k++) { /* little-endian u128 -> big-endian hex */
            unsigned char c = r[8 + 15 - k];
            id[2 * k] = hex[c >> 4];
            id[2 * k + 1] = hex[c & 15];
        }
        if (put(&offs, &off, 8) || put(&stamps, &ts, 8) || put(&ids, id, 32) || put(&pdata, b + p, plen)
            || put32(&poffs, (int32_t)pdata.len))
            goto done;
        size_t h = p + plen, hend = stop;
        while (h < hend) {
            unsigned char kk, vk;
            const unsigned char *kd, *vd;
            uint32_t kl, vl;
            if (tlv_item(b, &h, hend, &kk, &kd, &kl) < 0)
                goto bad;
            if (kk != KIND_STRING) {
                PyObject *t = Py_BuildValue("(ii)", (int)pairs, (int)kk);
                if (t == NULL || PyList_Append(typed, t) < 0) {
                    Py_XDECREF(t);
                    goto done;
                }
                Py_DECREF(t);
            }
            if (put(&kdata, kd, kl) || put32(&koffs, (int32_t)kdata.len))
                goto done;
            if (tlv_item(b, &h, hend, &vk, &vd, &vl) < 0)
                goto bad;
            if (put(&kinds, &vk, 1) || put(&vdata, vd, vl) || put32(&voffs, (int32_t)vdata.len))
                goto done;
            pairs++;
        }
        if (put32(&hstarts, pairs))
            goto done;
        at = stop;
        n++;
    }
    if (pdata.len > INT32_MAX || kdata.len > INT32_MAX || vdata.len > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a column of one poll exceeds Arrow's 2 GiB binary offsets");
        goto done;
    }
    result = Py_BuildValue("(nNNNNNNNNNNNO)", n, as_bytes(&offs), as_bytes(&stamps), as_bytes(&ids),
                           as_bytes(&poffs), as_bytes(&pdata), as_bytes(&hstarts), as_bytes(&koffs),
                           as_bytes(&kdata), as_bytes(&kinds), as_bytes(&voffs), as_bytes(&vdata), typed);
    goto done;
bad:
    PyErr_SetString(PyExc_ValueError, "poll reply: a record or header block does not frame");
done:
    PyMem_Free(offs.p); PyMem_Free(stamps.p); PyMem_Free(ids.p); PyMem_Free(poffs.p); PyMem_Free(pdata.p);
    PyMem_Free(hstarts.p); PyMem_Free(koffs.p); PyMem_Free(kdata.p); PyMem_Free(kinds.p);
    PyMem_Free(voffs.p); PyMem_Free(vdata.p);
    Py_XDECREF(typed);
    PyBuffer_Release(&pb);
    return result;
}

static PyMethodDef methods[] = {
    {"columns", columns, METH_VARARGS, "Column buffers of the stored records of a poll reply."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speedups", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    if (ferry_require_little_endian("adapters.spark._speedups") < 0)
        return NULL;
    return PyModule_Create(&module);
}
