/* adapters.spark._speedups: the compiled twin of the record loop of
 * adapters/spark/batches.py polled_to_batch.
 *
 * Why: that loop (one unpack, four slices and four list appends per record,
 * plus a walk over each header block) is ~0.8 us per record, the largest part
 * of a Spark batch read's Python time (docs/spark.md "Performance"). Here it
 * fills flat column buffers, sized once from the reply's length, inside the
 * bytes objects that Arrow then wraps without copying
 * (pyarrow.Array.from_buffers): ~0.05 us per record. Optional like the other extensions
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


/* An output column: a bytes object written in place and cut to its length at
 * the end (_PyBytes_Resize), so the buffer Arrow wraps is the one filled here,
 * with no copy. Columns are sized up front from the reply's length (below); a
 * pair column that the estimate missed doubles. */
typedef struct { PyObject *obj; char *p; size_t len, cap; } col_t;

static int
col_init(col_t *c, size_t cap)
{
    c->obj = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(cap ? cap : 1));
    if (c->obj == NULL)
        return -1;
    c->p = PyBytes_AS_STRING(c->obj);
    c->len = 0;
    c->cap = cap ? cap : 1;
    return 0;
}

static int
col_grow(col_t *c, size_t need)
{
    size_t cap = c->cap;
    while (cap < c->len + need)
        cap *= 2;
    if (_PyBytes_Resize(&c->obj, (Py_ssize_t)cap) < 0)
        return -1;
    c->p = PyBytes_AS_STRING(c->obj);
    c->cap = cap;
    return 0;
}

static inline int
col_put(col_t *c, const void *src, size_t n)
{
    if (c->len + n > c->cap && col_grow(c, n) < 0)
        return -1;
    memcpy(c->p + c->len, src, n);
    c->len += n;
    return 0;
}

static inline int col_put32(col_t *c, int32_t v) { return col_put(c, &v, 4); }

/* The column as a bytes object of its length (the reference moves to the caller). */
static PyObject *
col_done(col_t *c)
{
    if (_PyBytes_Resize(&c->obj, (Py_ssize_t)c->len) < 0)
        return NULL;
    PyObject *o = c->obj;
    c->obj = NULL;
    return o;
}

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

/* Two hex digits per byte value, so an id is 16 two-byte copies. */
static char hex_pairs[512];

enum { C_OFFS, C_STAMPS, C_IDS, C_POFFS, C_PDATA, C_HSTARTS, C_KOFFS, C_KDATA, C_KINDS, C_VOFFS, C_VDATA, NCOLS };

/* columns(body, pos, count, end) -> (n, offsets, stamps, id_hex, payload_offsets,
 *   payload_data, header_starts, key_offsets, key_data, kinds, value_offsets,
 *   value_data, typed)
 * offsets/stamps: n int64; id_hex: 32n ASCII (the u128 id, big-endian hex);
 * *_offsets: int32 Arrow offsets; header_starts: n+1 int32 into the header
 * pairs; kinds: one uint8 per pair; typed: list of (pair index, key kind) of
 * keys whose kind is not STRING (code 2).
 *
 * Sizing: the records after `pos` are at most `left` bytes, so there are at most
 * min(count, left / 64) of them, payload and key/value bytes each fit in `left`,
 * and the pairs are at most the header bytes / 10 (each pair is two 5-byte
 * TLV heads at least); that last bound is estimated from the first record and
 * doubled when short. Only the pages written are touched. */
static PyObject *
columns(PyObject *self, PyObject *args)
{
    Py_buffer pb;
    Py_ssize_t pos, count;
    unsigned long long end_offset;
    if (!PyArg_ParseTuple(args, "y*nnK", &pb, &pos, &count, &end_offset))
        return NULL;
    col_t c[NCOLS];
    memset(c, 0, sizeof c);
    PyObject *typed = PyList_New(0), *result = NULL;
    const unsigned char *b = (const unsigned char *)pb.buf;
    size_t len = (size_t)pb.len, at = (size_t)pos;
    Py_ssize_t n = 0;
    int32_t pairs = 0;
    if (typed == NULL)
        goto done;
    if (pos < 0 || count < 0) {
        PyErr_SetString(PyExc_ValueError, "pos and count must be >= 0");
        goto done;
    }
    size_t left = at < len ? len - at : 0;
    size_t rows = (size_t)count < left / HEAD ? (size_t)count : left / HEAD;
    size_t pair_est = 16 + rows * 2; /* grows if a poll carries more headers than this */
    if (col_init(&c[C_OFFS], 8 * rows) || col_init(&c[C_STAMPS], 8 * rows) || col_init(&c[C_IDS], 32 * rows)
        || col_init(&c[C_POFFS], 4 * (rows + 1)) || col_init(&c[C_PDATA], left)
        || col_init(&c[C_HSTARTS], 4 * (rows + 1)) || col_init(&c[C_KOFFS], 4 * (pair_est + 1))
        || col_init(&c[C_KDATA], 64 * 1024) || col_init(&c[C_KINDS], pair_est)
        || col_init(&c[C_VOFFS], 4 * (pair_est + 1)) || col_init(&c[C_VDATA], 64 * 1024)
        || col_put32(&c[C_POFFS], 0) || col_put32(&c[C_HSTARTS], 0) || col_put32(&c[C_KOFFS], 0)
        || col_put32(&c[C_VOFFS], 0))
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
        /* These three are sized for every record that fits in the reply: no check. */
        memcpy(c[C_OFFS].p + c[C_OFFS].len, &off, 8);
        c[C_OFFS].len += 8;
        memcpy(c[C_STAMPS].p + c[C_STAMPS].len, &ts, 8);
        c[C_STAMPS].len += 8;
        char *id = c[C_IDS].p + c[C_IDS].len;
        for (int k = 0; k < 16; k++) /* little-endian u128 -> big-endian hex */
            memcpy(id + 2 * k, hex_pairs + 2 * r[8 + 15 - k], 2);
        c[C_IDS].len += 32;
        if (col_put(&c[C_PDATA], b + p, plen) || col_put32(&c[C_POFFS], (int32_t)c[C_PDATA].len))
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
            if (col_put(&c[C_KDATA], kd, kl) || col_put32(&c[C_KOFFS], (int32_t)c[C_KDATA].len))
                goto done;
            if (tlv_item(b, &h, hend, &vk, &vd, &vl) < 0)
                goto bad;
            if (col_put(&c[C_KINDS], &vk, 1) || col_put(&c[C_VDATA], vd, vl)
                || col_put32(&c[C_VOFFS], (int32_t)c[C_VDATA].len))
                goto done;
            pairs++;
        }
        if (col_put32(&c[C_HSTARTS], pairs))
            goto done;
        at = stop;
        n++;
    }
    if (c[C_PDATA].len > INT32_MAX || c[C_KDATA].len > INT32_MAX || c[C_VDATA].len > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "a column of one poll exceeds Arrow's 2 GiB binary offsets");
        goto done;
    }
    PyObject *out[NCOLS];
    for (int k = 0; k < NCOLS; k++) {
        if ((out[k] = col_done(&c[k])) == NULL) {
            while (k--)
                Py_DECREF(out[k]);
            goto done;
        }
    }
    result = Py_BuildValue("(nNNNNNNNNNNNO)", n, out[C_OFFS], out[C_STAMPS], out[C_IDS], out[C_POFFS],
                           out[C_PDATA], out[C_HSTARTS], out[C_KOFFS], out[C_KDATA], out[C_KINDS],
                           out[C_VOFFS], out[C_VDATA], typed);
    goto done;
bad:
    PyErr_SetString(PyExc_ValueError, "poll reply: a record or header block does not frame");
done:
    for (int k = 0; k < NCOLS; k++)
        Py_XDECREF(c[k].obj);
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
    static const char hex[] = "0123456789abcdef";
    for (int v = 0; v < 256; v++) {
        hex_pairs[2 * v] = hex[v >> 4];
        hex_pairs[2 * v + 1] = hex[v & 15];
    }
    return PyModule_Create(&module);
}
