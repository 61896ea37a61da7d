/* adapters.kafka._speedups: the compiled twin of a Produce batch's records to
 * Ferry's stored layout, adapters/kafka/records.py _decode_records followed by
 * adapters/kafka/translate.py to_block.
 *
 * Why: with a C producer (kcat, librdkafka's own tools) the gateway was the
 * limit of Kafka produce, and a py-spy profile put about 60 % of its CPU in
 * those two Python loops, one pass per record (docs/kafka.md "Performance").
 * Optional like the other extensions (setup.py); FERRY_PURE_PYTHON=1 or a
 * missing build keeps the Python loops, and tests/kafka/test_kafka_block_speedups.py
 * checks both give the same bytes for generated batches, good and bad.
 *
 * Contract: for a records region the Python loops accept, the same block and
 * payload byte count; for anything else None, and the caller runs the Python
 * loops, which raise Kafka's error with their message. So this file never has
 * to agree with Python on *which* error, only on what is accepted and what it
 * becomes; when in doubt (a header name with non-ASCII bytes among its first
 * bytes, whose lowercase Python computes over Unicode) it answers None too.
 *
 * block(data, pos, limit, count, base_ts, log_append, max_ts) -> (bytearray, nbytes) | None
 *   data[pos:limit]: `count` v2 records (varint framed, zigzag); base_ts and
 *   max_ts the batch's base and max timestamps (ms); log_append true when the
 *   batch has log-append time (every record then takes max_ts).
 * configure(key_head, tombstone, raw_kind, string_kind, max_field,
 *           max_headers, max_ts_ms, reserved) once, from translate.py: the
 *   constants of the canonical layout stay defined in Python only. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_speedups_le.h"

#define STORED_HEAD 64 /* core/record.py: the stored record's header */
#define TLV 5          /* u8 kind, u32 length */

static PyObject *key_head, *tombstone, *reserved;
static int raw_kind = -1, string_kind = -1;
static Py_ssize_t max_field, max_headers;
static uint64_t max_ts_ms;

/* An unsigned LEB128 varint of at most max_bits bits from b[*pos..end);
 * 0 on success. Refuses what records.py _read_uvarint refuses. */
static int
uvarint(const unsigned char *b, Py_ssize_t *pos, Py_ssize_t end, int max_bits, uint64_t *out)
{
    uint64_t result = 0;
    int shift = 0;
    Py_ssize_t p = *pos;
    for (;;) {
        if (p >= end)
            return -1;
        unsigned char c = b[p++];
        result |= (uint64_t)(c & 0x7F) << shift;
        if (c < 0x80) {
            if (max_bits < 64 && (result >> max_bits))
                return -1;
            if (max_bits == 64 && shift == 63 && (c & 0x7E))
                return -1; /* bits past the 64th */
            *pos = p;
            *out = result;
            return 0;
        }
        shift += 7;
        if (shift >= max_bits)
            return -1;
    }
}

static inline int64_t
zigzag(uint64_t u)
{
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

/* A zigzag varint of 32 bits: 0 and *out, or -1. */
static int
zz32(const unsigned char *b, Py_ssize_t *pos, Py_ssize_t end, int64_t *out)
{
    uint64_t u;
    if (uvarint(b, pos, end, 32, &u) < 0)
        return -1;
    *out = zigzag(u);
    return 0;
}

/* A length-prefixed field of a record (zigzag varint length, -1 for null) at
 * b[*pos..end): 1 and its bytes, 0 for null (no bytes), -1 when malformed. */
static int
field(const unsigned char *b, Py_ssize_t *pos, Py_ssize_t end, const unsigned char **data, Py_ssize_t *len)
{
    int64_t n;
    *data = NULL;
    *len = 0;
    if (zz32(b, pos, end, &n) < 0)
        return -1;
    if (n == -1)
        return 0;
    if (n < 0 || n > end - *pos)
        return -1;
    *data = b + *pos;
    *len = (Py_ssize_t)n;
    *pos += *len;
    return 1;
}

static unsigned char *
put_tlv(unsigned char *w, int kind, const unsigned char *data, Py_ssize_t n)
{
    w[0] = (unsigned char)kind;
    wr32(w + 1, (uint32_t)n);
    memcpy(w + TLV, data, (size_t)n);
    return w + TLV + n;
}

/* One pass over the records: with out == NULL it checks everything and sums the
 * block's size into *total; with out it writes the block (the checks already
 * passed). 0 on success, -1 when the Python loops must decide. */
static int
walk(const unsigned char *b, Py_ssize_t pos, Py_ssize_t limit, Py_ssize_t count, int64_t base_ts,
     int log_append, int64_t append_ts, unsigned char *out, Py_ssize_t *total, Py_ssize_t *nbytes)
{
    const unsigned char *kh = (const unsigned char *)PyBytes_AS_STRING(key_head);
    Py_ssize_t khn = PyBytes_GET_SIZE(key_head);
    const unsigned char *tomb = (const unsigned char *)PyBytes_AS_STRING(tombstone);
    Py_ssize_t tombn = PyBytes_GET_SIZE(tombstone);
    const unsigned char *res = (const unsigned char *)PyBytes_AS_STRING(reserved);
    Py_ssize_t resn = PyBytes_GET_SIZE(reserved);
    unsigned char *w = out;
    Py_ssize_t size_all = 0, payload_all = 0;
    for (Py_ssize_t r = 0; r < count; r++) {
        int64_t size, hcount;
        uint64_t u;
        if (zz32(b, &pos, limit, &size) < 0 || size <= 0 || size > limit - pos)
            return -1;
        Py_ssize_t end = pos + (Py_ssize_t)size;
        pos++; /* the record's attributes: unused */
        if (pos > end || uvarint(b, &pos, end, 64, &u) < 0)
            return -1;
        int64_t td = zigzag(u);
        if (uvarint(b, &pos, end, 32, &u) < 0) /* the offset delta: unused, as in to_block */
            return -1;
        const unsigned char *key, *value;
        Py_ssize_t keyn, valuen;
        int has_value;
        if (field(b, &pos, end, &key, &keyn) < 0 || (has_value = field(b, &pos, end, &value, &valuen)) < 0)
            return -1;
        int tomb_here = !has_value; /* a null value: the tombstone header */
        if (zz32(b, &pos, end, &hcount) < 0 || hcount < 0 || 2 * hcount > end - pos)
            return -1;
        /* the record's stored header: origin timestamp, block length, payload length */
        int64_t ts;
        if (log_append)
            ts = append_ts;
        else if (__builtin_add_overflow(base_ts, td, &ts)) {
            if (td > 0)
                return -1; /* past any time Ferry can store: Python refuses it */
            ts = -1;       /* below int64: Python keeps no origin time for it */
        }
        if (ts > 0 && (uint64_t)ts > max_ts_ms)
            return -1;
        unsigned char *head = w;
        if (w) {
            memset(w, 0, STORED_HEAD);
            wr64(w + 40, ts > 0 ? (uint64_t)ts * 1000 : 0);
            wr32(w + 52, (uint32_t)valuen);
            w += STORED_HEAD;
            if (valuen)
                memcpy(w, value, (size_t)valuen);
            w += valuen;
        }
        Py_ssize_t hsize = 0; /* the header block's bytes */
        if (keyn) {
            Py_ssize_t chunks = (keyn + max_field - 1) / max_field;
            hsize = keyn + chunks * (khn + TLV);
            if (hsize > max_headers)
                return -1;
            if (w)
                for (Py_ssize_t at = 0; at < keyn; at += max_field) {
                    Py_ssize_t cn = keyn - at < max_field ? keyn - at : max_field;
                    memcpy(w, kh, (size_t)khn);
                    w = put_tlv(w + khn, raw_kind, key + at, cn);
                }
        }
        for (int64_t h = 0; h < hcount; h++) {
            const unsigned char *name, *hv;
            Py_ssize_t namen, hvn;
            if (field(b, &pos, end, &name, &namen) != 1 || !ferry_utf8_ok(name, namen)
                || field(b, &pos, end, &hv, &hvn) < 0)
                return -1; /* a header key is never null, and always UTF-8 */
            if (namen == 0 || hvn == 0)
                continue; /* dropped, as translate.py documents */
            if (namen > max_field || hvn > max_field)
                return -1;
            /* the reserved prefix, compared as Python does on text: ASCII only here */
            Py_ssize_t cmp = namen < resn ? namen : resn;
            int same = namen >= resn;
            for (Py_ssize_t i = 0; i < cmp; i++) {
                unsigned char c = name[i];
                if (c >= 0x80)
                    return -1;
                if (c >= 'A' && c <= 'Z')
                    c = (unsigned char)(c + 32);
                if (c != res[i])
                    same = 0;
            }
            if (same)
                return -1;
            hsize += 2 * TLV + namen + hvn;
            if (hsize > max_headers)
                return -1;
            if (w) {
                w = put_tlv(w, string_kind, name, namen);
                w = put_tlv(w, ferry_utf8_ok(hv, hvn) ? string_kind : raw_kind, hv, hvn);
            }
        }
        if (pos != end)
            return -1;
        if (tomb_here) {
            hsize += tombn;
            if (hsize > max_headers)
                return -1;
            if (w) {
                memcpy(w, tomb, (size_t)tombn);
                w += tombn;
            }
        }
        if (head)
            wr32(head + 48, (uint32_t)hsize);
        size_all += STORED_HEAD + valuen + hsize;
        payload_all += valuen;
    }
    if (pos != limit)
        return -1;
    *total = size_all;
    *nbytes = payload_all;
    return 0;
}

static PyObject *
block(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, limit, count;
    long long base_ts, append_ts;
    int log_append;
    if (key_head == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "adapters.kafka._speedups: configure() was not called");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "y*nnnLpL", &view, &pos, &limit, &count, &base_ts, &log_append,
                          &append_ts))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t total = 0, nbytes = 0;
    if (pos < 0 || limit > view.len || pos > limit || count < 0
        || walk(view.buf, pos, limit, count, base_ts, log_append, append_ts, NULL, &total, &nbytes) < 0) {
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    PyObject *out = PyByteArray_FromStringAndSize(NULL, total);
    if (out != NULL) {
        Py_ssize_t again = 0, nb = 0;
        if (walk(view.buf, pos, limit, count, base_ts, log_append, append_ts,
                 (unsigned char *)PyByteArray_AS_STRING(out), &again, &nb) < 0 || again != total) {
            PyErr_SetString(PyExc_RuntimeError, "adapters.kafka._speedups: the two passes disagree");
            Py_DECREF(out);
        } else
            result = Py_BuildValue("(Nn)", out, nbytes);
    }
    PyBuffer_Release(&view);
    return result;
}

static PyObject *
configure(PyObject *self, PyObject *args)
{
    PyObject *kh, *tb, *rs;
    int raw, str;
    Py_ssize_t mf, mh;
    unsigned long long mt;
    if (!PyArg_ParseTuple(args, "SSiinnKS", &kh, &tb, &raw, &str, &mf, &mh, &mt, &rs))
        return NULL;
    if (mf <= 0 || mh <= 0) {
        PyErr_SetString(PyExc_ValueError, "configure: limits must be positive");
        return NULL;
    }
    Py_INCREF(kh);
    Py_INCREF(tb);
    Py_INCREF(rs);
    Py_XSETREF(key_head, kh);
    Py_XSETREF(tombstone, tb);
    Py_XSETREF(reserved, rs);
    raw_kind = raw;
    string_kind = str;
    max_field = mf;
    max_headers = mh;
    max_ts_ms = mt;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"block", block, METH_VARARGS, "A Produce batch's records as stored records (see the file's comment)."},
    {"configure", configure, METH_VARARGS, "The canonical layout's constants, from translate.py."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "adapters.kafka._speedups", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    if (ferry_require_little_endian("adapters.kafka._speedups") < 0)
        return NULL;
    return PyModule_Create(&module);
}
