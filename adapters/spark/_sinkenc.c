/* adapters.spark._sinkenc: the compiled twin of the Spark sink's row loop
 * (adapters/spark/sink.py `_encode_python`).
 *
 * Why: that loop builds Python objects for every row (a tuple from `_rows`, a
 * TLV header block, the record head) and was ~5.5 us of worker CPU per row,
 * which held `df.write.format("ferry")` to 66-84k rows/s on local[2]
 * (docs/spark.md "Issue 17"). Here one call takes an Arrow batch's column
 * buffers and appends, per target Ferry partition, the records of the chunk
 * being filled, already in the dialect-2 SendMessages layout the client sends
 * (adapters/iggy/messages.py `_MessagesV2.write`: u32 count, 16-byte index
 * entries `u32 0, u32 end, u64 0`, then per message the 64-byte stored-record
 * head of core/record.py, the payload and the TLV header block).
 *
 * Contract (tests/spark/test_spark_sink_encode.py): the same bytes, the same
 * chunk boundaries and producer tags as the Python loop. The call works in two
 * passes: the first checks every row (header kinds and sizes, null payloads,
 * message ids, timestamps, partitions) and routes it, touching nothing; when
 * any row is not simple (a bad header, an id Python would parse but this does
 * not, a partition out of range, an unexpected column layout) it returns None
 * and the caller runs the Python loop on the same batch and the same state, so
 * every error keeps its exact text and the chunks sent before it. The second
 * pass writes the records; a chunk that fills (count or byte limit, as
 * sink.py) goes to the `send` callback (sink.py Chunks.emit) right away, as in
 * the Python loop. Measured in-process on the bench's rows (100 B payload, one
 * string header): ~0.1 us per row against ~8 us for the Python loop.
 *
 * State between calls (one task's rows arrive in many batches) is plain
 * Python lists the Python loop shares, one entry per Ferry partition: message
 * count, size as sink.py counts it, chunks closed so far, record bytes of the
 * open chunk, and its index entries and records in two bytearrays (below). The
 * records are written once, straight into those, and the client sends them
 * without a copy. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_speedups_le.h"

#define HEAD 64               /* core/record.py stored-record head, dialect 2's message head */
#define INDEX_ENTRY 16        /* iggy-middle.md 6.11: u32 0, u32 end position, u64 0 */
#define SIZE_OVERHEAD 80      /* sink.py's estimate per message: head + index entry */
#define MAX_FIELD 255         /* a header key or value is 1..255 bytes (core/header_value.py) */
#define MAX_KINDS 32          /* HeaderKind has 15; room for more without a rebuild */
#define MAX_ROW_BYTES (1u << 30) /* a record beyond this goes to the Python loop (u32 index ends) */

/* -- XXH32, as the gateway routes keys (core/broker.py choose_partition) -----------
 * Written from the algorithm description in xxHash's doc/xxhash_spec.md (seed 0);
 * tests compare it with xxhash.xxh32_intdigest. */
#define P32_1 0x9E3779B1u
#define P32_2 0x85EBCA77u
#define P32_3 0xC2B2AE3Du
#define P32_4 0x27D4EB2Fu
#define P32_5 0x165667B1u

static inline uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }
static inline uint32_t xx_round(uint32_t acc, uint32_t lane) { return rotl32(acc + lane * P32_2, 13) * P32_1; }

static uint32_t
xxh32(const unsigned char *p, size_t len)
{
    const unsigned char *end = p + len;
    uint32_t h;
    if (len >= 16) {
        uint32_t a1 = P32_1 + P32_2, a2 = P32_2, a3 = 0, a4 = 0u - P32_1;
        const unsigned char *limit = end - 16;
        do {
            a1 = xx_round(a1, rd32(p));
            a2 = xx_round(a2, rd32(p + 4));
            a3 = xx_round(a3, rd32(p + 8));
            a4 = xx_round(a4, rd32(p + 12));
            p += 16;
        } while (p <= limit);
        h = rotl32(a1, 1) + rotl32(a2, 7) + rotl32(a3, 12) + rotl32(a4, 18);
    } else {
        h = P32_5;
    }
    h += (uint32_t)len;
    for (; end - p >= 4; p += 4)
        h = rotl32(h + rd32(p) * P32_3, 17) * P32_4;
    for (; p < end; p++)
        h = rotl32(h + (*p) * P32_5, 11) * P32_1;
    h ^= h >> 15;
    h *= P32_2;
    h ^= h >> 13;
    h *= P32_3;
    h ^= h >> 16;
    return h;
}

/* -- Arrow columns -------------------------------------------------------------------
 * A variable-width column (string/binary, 32- or 64-bit offsets) arrives as
 * (validity or None, offsets, data or None, array offset, offset width); an int64
 * column as (validity or None, values, array offset). Every access is bounds
 * checked against the buffers: a layout that does not fit is "not simple". */
typedef struct {
    Py_buffer valid, offs, data;
    int has_valid, width;
    Py_ssize_t off;
} varcol_t;

typedef struct {
    Py_buffer valid, vals;
    int has_valid;
    Py_ssize_t off;
} intcol_t;

static int
get_buf(PyObject *o, Py_buffer *b)
{
    if (o == Py_None) {
        b->buf = NULL;
        b->len = 0;
        return 0;
    }
    return PyObject_GetBuffer(o, b, PyBUF_SIMPLE);
}

/* 1 parsed, 0 absent (None), -1 error set. */
static int
varcol_parse(PyObject *t, varcol_t *c)
{
    PyObject *v, *o, *d;
    if (t == Py_None)
        return 0;
    if (!PyArg_ParseTuple(t, "OOOni", &v, &o, &d, &c->off, &c->width))
        return -1;
    if ((c->width != 4 && c->width != 8) || c->off < 0 || o == Py_None) {
        PyErr_SetString(PyExc_ValueError, "column: bad offset width, array offset or offsets");
        return -1;
    }
    c->has_valid = v != Py_None;
    if (get_buf(v, &c->valid) < 0 || get_buf(o, &c->offs) < 0 || get_buf(d, &c->data) < 0)
        return -1;
    return 1;
}

static int
intcol_parse(PyObject *t, intcol_t *c)
{
    PyObject *v, *d;
    if (t == Py_None)
        return 0;
    if (!PyArg_ParseTuple(t, "OOn", &v, &d, &c->off))
        return -1;
    if (c->off < 0 || d == Py_None) {
        PyErr_SetString(PyExc_ValueError, "column: bad array offset or values");
        return -1;
    }
    c->has_valid = v != Py_None;
    if (get_buf(v, &c->valid) < 0 || get_buf(d, &c->vals) < 0)
        return -1;
    return 1;
}

static void
varcol_release(varcol_t *c)
{
    PyBuffer_Release(&c->valid);
    PyBuffer_Release(&c->offs);
    PyBuffer_Release(&c->data);
}

static void
intcol_release(intcol_t *c)
{
    PyBuffer_Release(&c->valid);
    PyBuffer_Release(&c->vals);
}

/* 1 null, 0 valid, -1 the bitmap is too short. */
static inline int
is_null(const Py_buffer *valid, int has_valid, size_t bit)
{
    if (!has_valid)
        return 0;
    if (bit / 8 >= (size_t)valid->len)
        return -1;
    return !((((const unsigned char *)valid->buf)[bit >> 3] >> (bit & 7)) & 1);
}

/* Entry `idx` (array offset applied) of an offsets buffer: its [start, end). -1 out of bounds. */
static inline int
offsets_at(const Py_buffer *offs, int width, size_t idx, int64_t *a, int64_t *b)
{
    if ((idx + 2) * (size_t)width > (size_t)offs->len)
        return -1;
    const unsigned char *p = (const unsigned char *)offs->buf + idx * width;
    if (width == 4) {
        *a = (int32_t)rd32(p);
        *b = (int32_t)rd32(p + 4);
    } else {
        *a = (int64_t)rd64(p);
        *b = (int64_t)rd64(p + 8);
    }
    return *a < 0 || *b < *a ? -1 : 0;
}

/* Row i of a variable-width column: 1 null, 0 value in *p and *len, -1 not simple. */
static inline int
varcol_get(const varcol_t *c, Py_ssize_t i, const unsigned char **p, size_t *len)
{
    size_t idx = (size_t)(c->off + i);
    int nul = is_null(&c->valid, c->has_valid, idx);
    if (nul)
        return nul;
    int64_t a, b;
    if (offsets_at(&c->offs, c->width, idx, &a, &b) < 0 || b > (int64_t)c->data.len)
        return -1;
    *p = (const unsigned char *)c->data.buf + a;
    *len = (size_t)(b - a);
    return 0;
}

/* Row i of an int64 column: 1 null, 0 value in *v, -1 not simple. */
static inline int
intcol_get(const intcol_t *c, Py_ssize_t i, int64_t *v)
{
    size_t idx = (size_t)(c->off + i);
    int nul = is_null(&c->valid, c->has_valid, idx);
    if (nul)
        return nul;
    if ((idx + 1) * 8 > (size_t)c->vals.len)
        return -1;
    *v = (int64_t)rd64((const unsigned char *)c->vals.buf + idx * 8);
    return 0;
}

/* -- header kinds ------------------------------------------------------------------------ */
typedef struct { const char *name; Py_ssize_t len; int code, fixed; } kind_t;

/* The kind named (p, n), or NULL. */
static const kind_t *
kind_find(const kind_t *kinds, int nk, const unsigned char *p, size_t n)
{
    for (int k = 0; k < nk; k++)
        if ((size_t)kinds[k].len == n && memcmp(kinds[k].name, p, n) == 0)
            return &kinds[k];
    return NULL;
}

/* The headers column, array<struct<key, kind?, value>>: the list offsets and the
 * struct's fields (each already cut to the struct's own offset by pyarrow). */
typedef struct {
    Py_buffer offs;
    int width, value_is_str, has_kind;
    Py_ssize_t off;
    varcol_t key, value, kind;
} hcol_t;

/* One row's headers: calls back per (key, kind code, value) kept; 0, or -1 not simple.
 * Mirrors sink.py `_header_blocks`: a null key or value skips the pair; a null or
 * empty kind means "string" for a string value column, else "raw". */
typedef struct { const unsigned char *k, *v; size_t kl, vl; int code; } pair_t;

static int
header_pair(const hcol_t *h, const kind_t *kinds, int nk, const kind_t *dflt, int64_t j, pair_t *out)
{
    int kn = varcol_get(&h->key, j, &out->k, &out->kl);
    int vn = varcol_get(&h->value, j, &out->v, &out->vl);
    if (kn < 0 || vn < 0)
        return -1;
    if (kn || vn)
        return 0; /* skipped */
    const kind_t *kind = dflt;
    if (h->has_kind) {
        const unsigned char *kp;
        size_t kl;
        int nn = varcol_get(&h->kind, j, &kp, &kl);
        if (nn < 0)
            return -1;
        if (!nn && kl) {
            kind = kind_find(kinds, nk, kp, kl);
            if (kind == NULL)
                return -1; /* unknown kind: Python names it */
        }
    }
    if (out->kl < 1 || out->kl > MAX_FIELD || out->vl < 1 || out->vl > MAX_FIELD
        || (kind->fixed && out->vl != (size_t)kind->fixed))
        return -1; /* HeaderValue raises the precise error */
    out->code = kind->code;
    return 1;
}

/* -- per-partition state: the open chunk's index entries and records, two bytearrays
 * the Python loop writes as well. They are reused from chunk to chunk (their length
 * is the most ever written; `lengths` says how many record bytes the open chunk
 * holds, its count how many index entries): a fresh buffer per chunk cost more than
 * the encoding, as every chunk then landed on new pages (page faults, ~2 us each on
 * a VM). A full chunk goes to `send` at once, before the buffers are written again. */
typedef struct {
    long long count, size, chunks, used;
    PyObject *idx, *body; /* borrowed from the state lists */
    size_t left_rows, left_bytes; /* what the batch's remaining rows for this partition add, tags aside */
} part_t;

/* Room for `need` more bytes after `used`; grows by `want` (what the batch can still add). */
static int
reserve(PyObject *ba, size_t used, size_t need, size_t want)
{
    if (used + need <= (size_t)PyByteArray_GET_SIZE(ba))
        return 0;
    return PyByteArray_Resize(ba, (Py_ssize_t)(used + (want > need ? want : need)));
}

/* Hand partition pid's chunk to send(pid, chunk number, count, index, records, record bytes). */
static int
close_chunk(part_t *q, Py_ssize_t pid, PyObject *send)
{
    PyObject *r = PyObject_CallFunction(send, "nLLOOL", pid, q->chunks, q->count, q->idx, q->body, q->used);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    q->chunks++;
    q->count = q->size = q->used = 0;
    return 0;
}

/* Per row, what pass 1 found and pass 2 writes. */
typedef struct { uint64_t lo, hi, origin; int64_t pid; uint32_t hlen; } row_t;

static signed char hex_value[256]; /* -1, or the digit's value (filled at import) */

/* The u128 of a hex id of ASCII hex digits (leading zeros allowed); -1 otherwise
 * (sink.py `_message_id` then parses or refuses it: int() takes more spellings). */
static int
parse_id(const unsigned char *p, size_t n, uint64_t *lo, uint64_t *hi)
{
    while (n > 1 && *p == '0') {
        p++;
        n--;
    }
    if (n == 0 || n > 32)
        return -1;
    uint64_t h = 0, l = 0;
    for (size_t i = 0; i < n; i++) {
        int d = hex_value[p[i]];
        if (d < 0)
            return -1;
        h = (h << 4) | (l >> 60);
        l = (l << 4) | (uint64_t)d;
    }
    *lo = l;
    *hi = h;
    return 0;
}

/* Read a list of Python ints (the per-partition state) into s[].field. */
#define LOAD_STATE(list, field)                                                             \
    for (Py_ssize_t q = 0; q < nparts; q++) {                                               \
        s[q].field = PyLong_AsLongLong(PyList_GET_ITEM(list, q));                           \
        if (s[q].field == -1 && PyErr_Occurred())                                           \
            goto done;                                                                      \
    }
#define STORE_STATE(list, field)                                                            \
    for (Py_ssize_t q = 0; q < nparts; q++) {                                               \
        PyObject *v = PyLong_FromLongLong(s[q].field);                                      \
        if (v == NULL || PyList_SetItem(list, q, v) < 0)                                    \
            goto done;                                                                      \
    }

static int
is_state_list(PyObject *o, Py_ssize_t n)
{
    return PyList_Check(o) && PyList_GET_SIZE(o) == n;
}

/* encode_rows(rows, payload, headers, ids, stamps, parts, keys, nparts, rr, kinds, tag,
 *             seq_base, max_count, max_bytes, counts, sizes, chunks, lengths, index,
 *             body, send) -> rr after the batch, or None
 * payload/ids/keys: varcol tuples (ids, keys may be None); stamps/parts: int64 tuples
 * or None; headers: None or (offsets, array offset, width, key, value, kind or None,
 * value_is_str); kinds: ((name bytes, code, fixed size or 0), ...); tag: the producer
 * tag block whose last 8 bytes are the int64 sequence (written as seq_base | chunk). */
static PyObject *
encode_rows(PyObject *self, PyObject *args)
{
    Py_ssize_t rows, nparts;
    long long rr;
    unsigned long long seq_base;
    long long max_count, max_bytes;
    PyObject *o_pay, *o_hdr, *o_ids, *o_ts, *o_parts, *o_keys, *o_kinds;
    PyObject *l_count, *l_size, *l_chunks, *l_len, *l_idx, *l_body, *send;
    Py_buffer tag;
    if (!PyArg_ParseTuple(args, "nOOOOOOnLOy*KLLOOOOOOO", &rows, &o_pay, &o_hdr, &o_ids, &o_ts, &o_parts,
                          &o_keys, &nparts, &rr, &o_kinds, &tag, &seq_base, &max_count, &max_bytes, &l_count,
                          &l_size, &l_chunks, &l_len, &l_idx, &l_body, &send))
        return NULL;
    varcol_t pay, ids, keys;
    intcol_t ts, parts;
    hcol_t hc;
    memset(&pay, 0, sizeof pay);
    memset(&ids, 0, sizeof ids);
    memset(&keys, 0, sizeof keys);
    memset(&ts, 0, sizeof ts);
    memset(&parts, 0, sizeof parts);
    memset(&hc, 0, sizeof hc);
    row_t *rv = NULL;
    part_t *s = NULL;
    PyObject *result = NULL;
    kind_t kinds[MAX_KINDS];
    int nk = 0, has_ids = 0, has_ts = 0, has_parts = 0, has_keys = 0, has_hdr = 0;
    const kind_t *k_string = NULL, *k_raw = NULL;

    if (rows < 0 || nparts <= 0 || rr < 0 || max_count <= 0 || max_bytes <= 0 || tag.len < 8
        || !PyCallable_Check(send) || !is_state_list(l_count, nparts) || !is_state_list(l_size, nparts)
        || !is_state_list(l_chunks, nparts) || !is_state_list(l_len, nparts) || !is_state_list(l_idx, nparts)
        || !is_state_list(l_body, nparts) || !PyTuple_Check(o_kinds)) {
        PyErr_SetString(PyExc_ValueError, "encode_rows: bad arguments");
        goto done;
    }
    for (Py_ssize_t q = 0; q < nparts; q++)
        if (!PyByteArray_CheckExact(PyList_GET_ITEM(l_idx, q)) || !PyByteArray_CheckExact(PyList_GET_ITEM(l_body, q))) {
            PyErr_SetString(PyExc_ValueError, "encode_rows: index and body must be bytearrays");
            goto done;
        }
    for (Py_ssize_t q = 0; q < PyTuple_GET_SIZE(o_kinds) && nk < MAX_KINDS; q++, nk++) {
        char *name;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(o_kinds, q), "y#ii", &name, &kinds[nk].len, &kinds[nk].code,
                              &kinds[nk].fixed))
            goto done;
        kinds[nk].name = name; /* borrowed from the kinds tuple, alive for the call */
    }
    k_string = kind_find(kinds, nk, (const unsigned char *)"string", 6);
    k_raw = kind_find(kinds, nk, (const unsigned char *)"raw", 3);
    if (k_string == NULL || k_raw == NULL) {
        PyErr_SetString(PyExc_ValueError, "encode_rows: the kinds need 'string' and 'raw'");
        goto done;
    }
    if (varcol_parse(o_pay, &pay) <= 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "encode_rows: a payload column is needed");
        goto done;
    }
    if ((has_ids = varcol_parse(o_ids, &ids)) < 0 || (has_keys = varcol_parse(o_keys, &keys)) < 0
        || (has_ts = intcol_parse(o_ts, &ts)) < 0 || (has_parts = intcol_parse(o_parts, &parts)) < 0)
        goto done;
    if (o_hdr != Py_None) {
        PyObject *ho, *hk, *hv, *hkind;
        if (!PyArg_ParseTuple(o_hdr, "OniOOOp", &ho, &hc.off, &hc.width, &hk, &hv, &hkind, &hc.value_is_str))
            goto done;
        if ((hc.width != 4 && hc.width != 8) || hc.off < 0 || get_buf(ho, &hc.offs) < 0
            || varcol_parse(hk, &hc.key) <= 0 || varcol_parse(hv, &hc.value) <= 0
            || (hc.has_kind = varcol_parse(hkind, &hc.kind)) < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "encode_rows: bad headers column");
            goto done;
        }
        has_hdr = 1;
    }
    const kind_t *dflt = hc.value_is_str ? k_string : k_raw;

    rv = PyMem_Malloc(sizeof(row_t) * (size_t)(rows ? rows : 1));
    s = PyMem_Calloc((size_t)nparts, sizeof(part_t));
    if (rv == NULL || s == NULL) {
        PyErr_NoMemory();
        goto done;
    }

    /* Pass 1: check and route every row; nothing is written. */
    long long rr_at = rr;
    for (Py_ssize_t i = 0; i < rows; i++) {
        row_t *r = &rv[i];
        const unsigned char *p;
        size_t n;
        int st;
        if (varcol_get(&pay, i, &p, &n) != 0) /* null payload: Python raises */
            goto fallback;
        size_t plen = n;
        size_t hl = 0;
        if (has_hdr) {
            int64_t a = 0, b = 0;
            if (offsets_at(&hc.offs, hc.width, (size_t)(hc.off + i), &a, &b) < 0)
                goto fallback;
            for (int64_t j = a; j < b; j++) {
                pair_t pr;
                int got = header_pair(&hc, kinds, nk, dflt, j, &pr);
                if (got < 0)
                    goto fallback;
                if (got)
                    hl += 10 + pr.kl + pr.vl;
                if (hl > MAX_ROW_BYTES)
                    goto fallback;
            }
        }
        if (plen > MAX_ROW_BYTES - hl)
            goto fallback;
        r->hlen = (uint32_t)hl;
        r->lo = r->hi = 0;
        if (has_ids) {
            st = varcol_get(&ids, i, &p, &n);
            if (st < 0 || (st == 0 && n && parse_id(p, n, &r->lo, &r->hi) < 0))
                goto fallback;
        }
        int64_t v = 0;
        r->origin = 0;
        if (has_ts) {
            st = intcol_get(&ts, i, &v);
            if (st < 0 || (st == 0 && v < 0)) /* a negative origin does not pack as u64 */
                goto fallback;
            if (st == 0)
                r->origin = (uint64_t)v;
        }
        st = 1;
        if (has_parts) {
            st = intcol_get(&parts, i, &v);
            if (st < 0 || (st == 0 && (v < 0 || v >= nparts)))
                goto fallback;
        }
        if (st == 0) {
            r->pid = v;
        } else {
            st = 1;
            if (has_keys) {
                st = varcol_get(&keys, i, &p, &n);
                if (st < 0)
                    goto fallback;
                if (st == 0)
                    r->pid = (int64_t)(xxh32(p, n) % (uint32_t)nparts);
            }
            if (st) {
                r->pid = rr_at % nparts;
                rr_at++;
            }
        }
        s[r->pid].left_rows++;
        s[r->pid].left_bytes += HEAD + plen + hl;
    }

    /* Pass 2: write. */
    LOAD_STATE(l_count, count);
    LOAD_STATE(l_size, size);
    LOAD_STATE(l_chunks, chunks);
    LOAD_STATE(l_len, used);
    for (Py_ssize_t q = 0; q < nparts; q++) {
        s[q].idx = PyList_GET_ITEM(l_idx, q);
        s[q].body = PyList_GET_ITEM(l_body, q);
        if (s[q].count < 0 || s[q].used < 0 || s[q].count * INDEX_ENTRY > PyByteArray_GET_SIZE(s[q].idx)
            || s[q].used > PyByteArray_GET_SIZE(s[q].body)) {
            PyErr_SetString(PyExc_ValueError, "encode_rows: state does not fit its buffers");
            goto done;
        }
    }
    const unsigned char *tp = (const unsigned char *)tag.buf;
    size_t taglen = (size_t)tag.len;
    for (Py_ssize_t i = 0; i < rows; i++) {
        const row_t *r = &rv[i];
        part_t *q = &s[r->pid];
        const unsigned char *pp;
        size_t plen;
        varcol_get(&pay, i, &pp, &plen); /* checked in pass 1 */
        size_t hl = r->hlen + (q->count == 0 ? taglen : 0); /* the chunk's first message carries the tag */
        size_t reclen = HEAD + plen + hl;
        size_t iat = (size_t)q->count * INDEX_ENTRY;
        if (reserve(q->body, (size_t)q->used, reclen, q->left_bytes + taglen) < 0
            || reserve(q->idx, iat, INDEX_ENTRY, INDEX_ENTRY * q->left_rows) < 0)
            goto done;
        q->left_rows--;
        q->left_bytes -= HEAD + plen + r->hlen;
        unsigned char *w = (unsigned char *)PyByteArray_AS_STRING(q->body) + q->used;
        wr64(w, 0); /* checksum: the gateway stamps it */
        wr64(w + 8, r->lo);
        wr64(w + 16, r->hi);
        wr64(w + 24, 0); /* offset and append time: the gateway's */
        wr64(w + 32, 0);
        wr64(w + 40, r->origin);
        wr32(w + 48, (uint32_t)hl);
        wr32(w + 52, (uint32_t)plen);
        wr64(w + 56, 0); /* reserved */
        w += HEAD;
        memcpy(w, pp, plen);
        w += plen;
        if (q->count == 0) {
            memcpy(w, tp, taglen - 8);
            wr64(w + taglen - 8, seq_base | (uint64_t)q->chunks);
            w += taglen;
        }
        if (has_hdr && r->hlen) {
            int64_t a = 0, b = 0;
            offsets_at(&hc.offs, hc.width, (size_t)(hc.off + i), &a, &b);
            for (int64_t j = a; j < b; j++) {
                pair_t pr;
                if (header_pair(&hc, kinds, nk, dflt, j, &pr) <= 0)
                    continue;
                *w = (unsigned char)k_string->code;
                wr32(w + 1, (uint32_t)pr.kl);
                memcpy(w + 5, pr.k, pr.kl);
                w += 5 + pr.kl;
                *w = (unsigned char)pr.code;
                wr32(w + 1, (uint32_t)pr.vl);
                memcpy(w + 5, pr.v, pr.vl);
                w += 5 + pr.vl;
            }
        }
        q->used += (long long)reclen;
        unsigned char *e = (unsigned char *)PyByteArray_AS_STRING(q->idx) + iat;
        wr32(e, 0);
        wr32(e + 4, (uint32_t)q->used);
        wr64(e + 8, 0);
        q->count++;
        q->size += SIZE_OVERHEAD + (long long)plen + r->hlen;
        if ((q->count >= max_count || q->size >= max_bytes) && close_chunk(q, (Py_ssize_t)r->pid, send) < 0)
            goto done;
    }
    STORE_STATE(l_count, count);
    STORE_STATE(l_size, size);
    STORE_STATE(l_chunks, chunks);
    STORE_STATE(l_len, used);
    result = PyLong_FromLongLong(rr_at);
    goto done;
fallback:
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(s); /* after an error the task fails: the state is not used again */
    PyMem_Free(rv);
    varcol_release(&pay);
    varcol_release(&ids);
    varcol_release(&keys);
    intcol_release(&ts);
    intcol_release(&parts);
    PyBuffer_Release(&hc.offs);
    varcol_release(&hc.key);
    varcol_release(&hc.value);
    varcol_release(&hc.kind);
    PyBuffer_Release(&tag);
    return result;
}

static PyObject *
py_xxh32(PyObject *self, PyObject *arg)
{
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t h = xxh32((const unsigned char *)b.buf, (size_t)b.len);
    PyBuffer_Release(&b);
    return PyLong_FromUnsignedLong(h);
}

static PyMethodDef methods[] = {
    {"encode_rows", encode_rows, METH_VARARGS, "Append one Arrow batch's rows to the sink's open chunks."},
    {"xxh32", py_xxh32, METH_O, "XXH32 (seed 0) of a buffer, as the key routing uses it (tests)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_sinkenc", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__sinkenc(void)
{
    if (ferry_require_little_endian("adapters.spark._sinkenc") < 0)
        return NULL;
    for (int c = 0; c < 256; c++)
        hex_value[c] = (signed char)(c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                     : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1);
    return PyModule_Create(&module);
}
