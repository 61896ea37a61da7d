/* core._speedups: the compiled twin of core.log.encoded.stamp_records (and
 * xor_mask, the WebSocket unmasking loop adapters/wsmask.py installs).
 *
 * Why: stamping a block of stored records (offset, timestamp, id, origin,
 * XXH3-64 checksum per record) costs ~0.57 us per record in Python, over half
 * of an Iggy SendMessages batch's server time (docs/iggy.md "Throughput"). The
 * loop below does the same work at memory speed. It is optional: setup.py
 * builds it when a C compiler is there, and core/log/encoded.py falls back to
 * the pure-Python loop (same results, same errors; tests/core/test_speedups.py
 * checks both byte for byte) when it is missing, fails its self-check, or
 * FERRY_PURE_PYTHON=1 is set.
 *
 * The hash is XXH3-64 with seed 0 (core/record.py), taken from the xxhash
 * library Ferry already depends on: the `xxhash` wheel's extension exports
 * XXH3_64bits, and Debian's libxxhash0 does too. It is looked up with dlsym,
 * so no xxhash header is needed at build time; the Python side checks the
 * result against xxhash.xxh3_64_intdigest before trusting it.
 *
 * The stored layout (core/record.py): u64 checksum of bytes 8..end, u128 id,
 * u64 offset, u64 timestamp, u64 origin timestamp, u32 headers length H,
 * u32 payload length P, u64 reserved, then P payload and H header bytes, all
 * little-endian. Nothing here allocates per record except the two result ints.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include "_speedups_le.h"

typedef uint64_t (*xxh3_fn)(const void *data, size_t len);
static xxh3_fn xxh3_64 = NULL;

#define HEAD 64 /* RECORD_HEADER_SIZE */


/* Byte width of each header kind's values (core/header_value.py _FIXED_SIZE):
 * 0 for RAW and STRING (1..255 bytes), -1 for codes that are no kind. */
static const int kind_width[256] = {
    [0] = -1, [1] = 0, [2] = 0, [3] = 1, [4] = 1, [5] = 2, [6] = 4, [7] = 8, [8] = 16,
    [9] = 1, [10] = 2, [11] = 4, [12] = 8, [13] = 16, [14] = 4, [15] = 8,
    [16 ... 255] = -1,
};

/* One field of a header block: u8 kind, u32 length, 1..255 bytes that are a
 * valid value of the kind. Returns the position after it, or 0 if it is not. */
static size_t
field_ok(const unsigned char *b, size_t pos, size_t end)
{
    if (end - pos < 5)
        return 0;
    unsigned char kind = b[pos];
    uint32_t len = rd32(b + pos + 1);
    int width = kind_width[kind];
    size_t start = pos + 5;
    if (width < 0 || len < 1 || len > 255 || len > end - start)
        return 0;
    if (width > 0 && (len != (uint32_t)width || (kind == 3 && b[start] > 1)))
        return 0;
    if (kind == 2 && !ferry_utf8_ok(b + start, len))
        return 0;
    return start + len;
}

/* headers_ok(data) -> bool: whether Headers.decode (core/message.py) accepts
 * this TLV block; used for the test that both agree. */
static int
block_ok(const unsigned char *b, size_t pos, size_t end)
{
    while (pos < end) {
        pos = field_ok(b, pos, end); /* key */
        if (pos == 0 || pos == end)
            return 0;
        pos = field_ok(b, pos, end); /* value */
        if (pos == 0)
            return 0;
    }
    return 1;
}

static PyObject *
headers_ok(PyObject *self, PyObject *arg)
{
    Py_buffer pb;
    if (PyObject_GetBuffer(arg, &pb, PyBUF_SIMPLE) < 0)
        return NULL;
    int ok = block_ok((const unsigned char *)pb.buf, 0, (size_t)pb.len);
    PyBuffer_Release(&pb);
    return PyBool_FromLong(ok);
}

/* stamp(buf, count, base_offset, timestamp, max_payload, max_headers, view, check, id_block)
 *
 * Mirrors stamp_records' loop. Returns (sizes, plens) on success, or
 * (None, "truncated", index) / (None, "trailing", nbytes) for the two framing
 * errors the Python wrapper turns into its typed exceptions. Records that need
 * a closer look (reserved field set, running past the block, payload over
 * max_payload, a header block over max_headers or one block_ok does not
 * accept) are handed to check(view, stop, end, hlen, plen, reserved, index),
 * which raises the precise error (or validates); id_block(count, offset) gives
 * (lo_base, hi) the first time a record has id 0. */
static PyObject *
stamp(PyObject *self, PyObject *args)
{
    PyObject *bufobj, *view, *check, *id_block;
    Py_ssize_t count;
    unsigned long long base, timestamp, max_payload, max_headers;
    if (!PyArg_ParseTuple(args, "OnKKKKOOO", &bufobj, &count, &base, &timestamp, &max_payload, &max_headers,
                          &view, &check, &id_block))
        return NULL;
    if (count < 1) {
        PyErr_SetString(PyExc_ValueError, "count must be positive");
        return NULL;
    }
    Py_buffer pb;
    if (PyObject_GetBuffer(bufobj, &pb, PyBUF_WRITABLE | PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *sizes = PyList_New(count), *plens = PyList_New(count), *result = NULL;
    if (sizes == NULL || plens == NULL)
        goto done;
    unsigned char *b = (unsigned char *)pb.buf;
    size_t end = (size_t)pb.len, pos = 0;
    int have_ids = 0;
    uint64_t id_lo_base = 0, id_hi = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        uint64_t offset = base + (uint64_t)i;
        if (end - pos < HEAD) {
            result = Py_BuildValue("(Osn)", Py_None, "truncated", i);
            goto done;
        }
        unsigned char *r = b + pos;
        uint64_t lo = rd64(r + 8), hi = rd64(r + 16), origin = rd64(r + 40), reserved = rd64(r + 56);
        uint32_t hlen = rd32(r + 48), plen = rd32(r + 52);
        size_t stop = pos + HEAD + (size_t)plen + (size_t)hlen;
        if (reserved || stop > end || plen > max_payload
            || (hlen && (hlen > max_headers || !block_ok(b, pos + HEAD + plen, stop)))) {
            PyObject *ok = PyObject_CallFunction(check, "OnnIIKn", view, (Py_ssize_t)stop, (Py_ssize_t)end,
                                                 hlen, plen, reserved, i);
            if (ok == NULL)
                goto done;
            Py_DECREF(ok);
            if (stop > end || plen > max_payload) { /* check always raises for these */
                PyErr_SetString(PyExc_SystemError, "stamp check let a bad record through");
                goto done;
            }
        }
        if (!(lo | hi)) {
            if (!have_ids) {
                PyObject *ids = PyObject_CallFunction(id_block, "nK", count, offset);
                if (ids == NULL)
                    goto done;
                PyObject *l = PyTuple_Check(ids) && PyTuple_GET_SIZE(ids) == 2 ? PyTuple_GET_ITEM(ids, 0) : NULL;
                if (l == NULL) {
                    Py_DECREF(ids);
                    PyErr_SetString(PyExc_TypeError, "id_block must return (lo_base, hi)");
                    goto done;
                }
                /* lo_base may be negative (lo - first offset): u64 arithmetic
                 * wraps back to lo + (offset - first offset), as in Python. */
                id_lo_base = PyLong_AsUnsignedLongLongMask(l);
                id_hi = PyLong_AsUnsignedLongLongMask(PyTuple_GET_ITEM(ids, 1));
                Py_DECREF(ids);
                if (PyErr_Occurred())
                    goto done;
                have_ids = 1;
            }
            lo = id_lo_base + offset;
            hi = id_hi;
        }
        wr64(r + 8, lo);
        wr64(r + 16, hi);
        wr64(r + 24, offset);
        wr64(r + 32, timestamp);
        wr64(r + 40, origin ? origin : timestamp);
        wr64(r, xxh3_64(r + 8, stop - pos - 8));
        PyObject *s = PyLong_FromSize_t(stop - pos), *p = PyLong_FromUnsignedLong(plen);
        if (s == NULL || p == NULL) {
            Py_XDECREF(s);
            Py_XDECREF(p);
            goto done;
        }
        PyList_SET_ITEM(sizes, i, s);
        PyList_SET_ITEM(plens, i, p);
        pos = stop;
    }
    if (pos != end)
        result = Py_BuildValue("(Osn)", Py_None, "trailing", (Py_ssize_t)(end - pos));
    else
        result = PyTuple_Pack(2, sizes, plens);
done:
    Py_XDECREF(sizes);
    Py_XDECREF(plens);
    PyBuffer_Release(&pb);
    return result;
}

/* index_block(sizes, plens, pos, byte_pos, timestamp) -> bytes
 *
 * The offset-index entries (core/log/index.py INDEX_ENTRY, "<QIQQ": position,
 * length, byte position, timestamp; 28 bytes) of one stamped block placed in
 * its segment from `pos`, its Pravega byte view from `byte_pos` (8 + payload
 * length per record, docs/storage.md). Twin of the block branch of
 * core.log.pending.index_entries. */
static PyObject *
index_block(PyObject *self, PyObject *args)
{
    PyObject *sizes, *plens;
    unsigned long long pos, byte_pos, timestamp;
    if (!PyArg_ParseTuple(args, "O!O!KKK", &PyList_Type, &sizes, &PyList_Type, &plens, &pos, &byte_pos, &timestamp))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(sizes);
    if (PyList_GET_SIZE(plens) != n) {
        PyErr_SetString(PyExc_ValueError, "sizes and plens differ in length");
        return NULL;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, n * 28);
    if (out == NULL)
        return NULL;
    unsigned char *o = (unsigned char *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++, o += 28) {
        unsigned long size = PyLong_AsUnsignedLong(PyList_GET_ITEM(sizes, i));
        unsigned long plen = PyLong_AsUnsignedLong(PyList_GET_ITEM(plens, i));
        if (PyErr_Occurred() || size > 0xFFFFFFFFUL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_OverflowError, "record size does not fit the index's u32");
            Py_DECREF(out);
            return NULL;
        }
        uint32_t len32 = (uint32_t)size;
        wr64(o, pos);
        memcpy(o + 8, &len32, 4);
        wr64(o + 12, byte_pos);
        wr64(o + 20, timestamp);
        pos += size;
        byte_pos += 8 + (uint64_t)plen;
    }
    return out;
}

/* walk(buf, start, end, count) -> (ends, payload_bytes) | (None, problem, index, ends_before)
 *
 * Check that buf[start:end] is exactly `count` records in the stored layout
 * (header lengths chain to `end`, reserved fields zero) without changing it.
 * `ends` is a tuple of each record's end, relative to `start` (what an Iggy
 * 0.8 index lists, iggy-middle.md 6.11). `problem` names the first fault:
 * "short" (header cut off), "reserved", "past_end" or "trailing". */
static PyObject *
walk(PyObject *self, PyObject *args)
{
    PyObject *bufobj;
    Py_ssize_t start, end, count;
    if (!PyArg_ParseTuple(args, "Onnn", &bufobj, &start, &end, &count))
        return NULL;
    Py_buffer pb;
    if (PyObject_GetBuffer(bufobj, &pb, PyBUF_SIMPLE) < 0)
        return NULL;
    PyObject *result = NULL, *ends = NULL;
    if (start < 0 || end > pb.len || start > end || count < 0) {
        PyErr_SetString(PyExc_ValueError, "walk: bad bounds");
        goto done;
    }
    ends = PyTuple_New(count);
    if (ends == NULL)
        goto done;
    const unsigned char *b = (const unsigned char *)pb.buf;
    size_t pos = (size_t)start, stop = (size_t)end;
    unsigned long long payload = 0;
    const char *problem = NULL;
    Py_ssize_t i;
    for (i = 0; i < count; i++) {
        if (stop - pos < HEAD) { problem = "short"; break; }
        const unsigned char *r = b + pos;
        if (rd64(r + 56)) { problem = "reserved"; break; }
        uint32_t hlen = rd32(r + 48), plen = rd32(r + 52);
        size_t next = pos + HEAD + (size_t)plen + (size_t)hlen;
        if (next > stop) { problem = "past_end"; break; }
        PyObject *e = PyLong_FromSize_t(next - (size_t)start);
        if (e == NULL)
            goto done;
        PyTuple_SET_ITEM(ends, i, e);
        payload += plen;
        pos = next;
    }
    if (problem == NULL && pos != stop)
        problem = "trailing";
    if (problem != NULL) {
        PyObject *prefix = PyTuple_GetSlice(ends, 0, i); /* the ends found before the fault */
        if (prefix != NULL)
            result = Py_BuildValue("(OsnN)", Py_None, problem, i, prefix);
    }
    else
        result = Py_BuildValue("(OK)", ends, payload);
done:
    Py_XDECREF(ends);
    PyBuffer_Release(&pb);
    return result;
}

/* xxh3_64(data) -> int: the resolved hash, for the Python side's self-check. */
static PyObject *
py_xxh3_64(PyObject *self, PyObject *arg)
{
    Py_buffer pb;
    if (PyObject_GetBuffer(arg, &pb, PyBUF_SIMPLE) < 0)
        return NULL;
    uint64_t h = xxh3_64(pb.buf, (size_t)pb.len);
    PyBuffer_Release(&pb);
    return PyLong_FromUnsignedLongLong(h);
}

/* xor_mask(data, key) -> bytearray: `data` XORed with the 4-byte `key`
 * repeated from its first byte: RFC 6455 section 5.3 unmasking, which every
 * client-to-server WebSocket frame needs. wsproto does it with four
 * bytes.translate passes over strided copies (~1 ms per MB here, a third of
 * the server's time on a 180 KB Iggy batch sent over iggy+ws://); this loop
 * XORs eight bytes at a time (adapters/wsmask.py installs it). */
static PyObject *
xor_mask(PyObject *self, PyObject *args)
{
    Py_buffer data, key;
    if (!PyArg_ParseTuple(args, "y*y*", &data, &key))
        return NULL;
    PyObject *out = NULL;
    if (key.len != 4) {
        PyErr_SetString(PyExc_ValueError, "xor_mask: the key is 4 bytes");
        goto done;
    }
    out = PyByteArray_FromStringAndSize(NULL, data.len);
    if (out == NULL)
        goto done;
    const unsigned char *src = (const unsigned char *)data.buf;
    unsigned char *dst = (unsigned char *)PyByteArray_AS_STRING(out);
    const unsigned char *k = (const unsigned char *)key.buf;
    uint32_t k4 = rd32(k);
    uint64_t k8 = ((uint64_t)k4 << 32) | k4;
    size_t n = (size_t)data.len, i = 0;
    for (; i + 8 <= n; i += 8)
        wr64(dst + i, rd64(src + i) ^ k8); /* i is a multiple of 4: the key starts again */
    for (; i < n; i++)
        dst[i] = src[i] ^ k[i & 3];
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&key);
    return out;
}

/* index_spans(index, rel, end_rel, budget, need_one) -> (lens, runs): the record
 * walk of Segment.read (core/log/segment.py, its Python twin _spans_python) over
 * a segment's offset index (entries "<QIQQ": file position, length, byte
 * position, timestamp; 28 bytes). Takes records rel..end_rel-1 while they fit
 * in `budget` bytes (the first one regardless when need_one); returns their
 * lengths and the contiguous runs [start, end) of file bytes they occupy (a
 * batch header between two records splits a run). Why: the Python loop costs
 * ~0.4 us per record, the largest Ferry-side cost of a 1,000-record poll. */
#define INDEX_ENTRY_SIZE 28

static PyObject *
index_spans(PyObject *self, PyObject *args)
{
    Py_buffer pb;
    Py_ssize_t rel, end_rel, budget;
    int need_one;
    if (!PyArg_ParseTuple(args, "y*nnnp", &pb, &rel, &end_rel, &budget, &need_one))
        return NULL;
    PyObject *lens = NULL, *runs = NULL, *result = NULL;
    if (rel < 0 || end_rel < rel || end_rel > pb.len / INDEX_ENTRY_SIZE) {
        PyErr_SetString(PyExc_ValueError, "index_spans: entries out of range");
        goto done;
    }
    lens = PyList_New(0);
    runs = PyList_New(0);
    if (lens == NULL || runs == NULL)
        goto done;
    const unsigned char *b = (const unsigned char *)pb.buf;
    unsigned long long total = 0, run_start = 0, run_end = 0;
    int have = 0;
    for (Py_ssize_t i = rel; i < end_rel; i++) {
        const unsigned char *e = b + i * INDEX_ENTRY_SIZE;
        unsigned long long pos = rd64(e);
        uint32_t ln = rd32(e + 8);
        /* signed: a budget already spent by a need_one record (negative) takes nothing more */
        if ((long long)(total + ln) > (long long)budget && (have || !need_one))
            break;
        PyObject *n = PyLong_FromUnsignedLong(ln);
        if (n == NULL || PyList_Append(lens, n) < 0) {
            Py_XDECREF(n);
            goto done;
        }
        Py_DECREF(n);
        if (!have) {
            run_start = pos;
            have = 1;
        }
        else if (pos != run_end) {  /* a batch header lies between: close the run */
            PyObject *r = Py_BuildValue("(KK)", run_start, run_end);
            if (r == NULL || PyList_Append(runs, r) < 0) {
                Py_XDECREF(r);
                goto done;
            }
            Py_DECREF(r);
            run_start = pos;
        }
        run_end = pos + ln;
        total += ln;
    }
    if (have) {
        PyObject *r = Py_BuildValue("(KK)", run_start, run_end);
        if (r == NULL || PyList_Append(runs, r) < 0) {
            Py_XDECREF(r);
            goto done;
        }
        Py_DECREF(r);
    }
    result = PyTuple_Pack(2, lens, runs);
done:
    Py_XDECREF(lens);
    Py_XDECREF(runs);
    PyBuffer_Release(&pb);
    return result;
}

static PyMethodDef methods[] = {
    {"stamp", stamp, METH_VARARGS, "Stamp a block of stored records in place (core.log.encoded)."},
    {"index_block", index_block, METH_VARARGS, "Offset-index entries of a stamped block (core.log.pending)."},
    {"headers_ok", headers_ok, METH_O, "Whether a TLV header block is one Headers.decode accepts."},
    {"walk", walk, METH_VARARGS, "Check the framing of a block of stored records; their ends."},
    {"xxh3_64", py_xxh3_64, METH_O, "XXH3-64, seed 0, of a bytes-like object."},
    {"index_spans", index_spans, METH_VARARGS, "The records of a segment read from its offset index: (lens, runs)."},
    {"xor_mask", xor_mask, METH_VARARGS, "data XOR a repeated 4-byte key (RFC 6455 masking), as a bytearray."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speedups", NULL, -1, methods};

/* Find XXH3_64bits: in the xxhash wheel's extension (already loaded by the
 * import below), else in the system's libxxhash. */
static int
resolve_xxh3(void)
{
    PyObject *mod = PyImport_ImportModule("xxhash._xxhash");
    if (mod != NULL) {
        PyObject *file = PyObject_GetAttrString(mod, "__file__");
        Py_DECREF(mod);
        const char *path = file != NULL ? PyUnicode_AsUTF8(file) : NULL;
        if (path != NULL) {
            void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (h != NULL)
                xxh3_64 = (xxh3_fn)dlsym(h, "XXH3_64bits");
        }
        Py_XDECREF(file);
    }
    PyErr_Clear();
    if (xxh3_64 == NULL) {
        void *h = dlopen("libxxhash.so.0", RTLD_NOW | RTLD_LOCAL);
        if (h != NULL)
            xxh3_64 = (xxh3_fn)dlsym(h, "XXH3_64bits");
    }
    return xxh3_64 != NULL;
}

PyMODINIT_FUNC
PyInit__speedups(void)
{
    if (ferry_require_little_endian("core._speedups") < 0)
        return NULL;
    if (!resolve_xxh3()) {
        PyErr_SetString(PyExc_ImportError, "core._speedups: XXH3_64bits not found in xxhash or libxxhash");
        return NULL;
    }
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    /* The resolved hash, for other extensions (adapters/iggy/_speedups.c):
     * one lookup of XXH3_64bits in the whole process. */
    PyObject *cap = PyCapsule_New((void *)xxh3_64, "core._speedups.xxh3_64_capsule", NULL);
    if (cap == NULL || PyModule_AddObject(m, "xxh3_64_capsule", cap) < 0) {
        Py_XDECREF(cap);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
