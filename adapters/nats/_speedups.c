/* adapters.nats._speedups: the compiled twin of ServerCodec.scan_pubs
 * (adapters/nats/codec.py), the loop that takes every complete
 * `PUB <subject> [reply] <size>\r\n<payload>\r\n` at the front of a receive.
 *
 * Why: a py-spy profile of the 128 B publish benchmark put 86 % of the server's
 * time in that loop (docs/nats.md "Performance"), already at the pure-Python
 * floor. Optional like the other extensions (setup.py); the Python loop stays,
 * and tests/nats/test_nats_fast_path.py runs both against the event parser.
 *
 * Contract: exactly the Python loop's behaviour. It stops, consuming nothing
 * more, at the first frame that is not a complete PUB in the exact form
 * clients write (single spaces, no tab, CRLF, a size of 1..max_digits ASCII
 * digits, a non-empty subject and reply, payload within max_payload), or
 * that refuse(subject, reply) claims; refuse is only asked when the subject
 * or reply starts with '_' or '$'. Appends (subject, reply, arg, payload) per
 * PUB: str, str ("" for none; UTF-8 with surrogateescape), bytearray, bytearray;
 * arg is the argument with its CRLF (a MSG line reuses it whole). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static PyObject *
decode(const char *s, Py_ssize_t n)
{
    return PyUnicode_DecodeUTF8(s, n, "surrogateescape");
}

/* One PUB frame at b[pos..n) in the exact form the fast path takes; 1 and the
 * fields when it is complete and well formed, 0 otherwise (the caller stops). */
typedef struct {
    const char *subj, *reply, *arg;
    Py_ssize_t slen, replen, alen, body, plen, end;
} pub_t;

static int
parse_pub(const char *b, Py_ssize_t n, Py_ssize_t pos, Py_ssize_t max_line, Py_ssize_t max_payload,
          Py_ssize_t max_digits, pub_t *f)
{
    if (pos < 0 || n - pos < 4 || memcmp(b + pos, "PUB ", 4) != 0)
        return 0;
    Py_ssize_t start = pos + 4;
    if (start + 1 > n)
        return 0;
    const char *nlp = memchr(b + start + 1, '\n', (size_t)(n - start - 1));
    if (nlp == NULL)
        return 0;
    Py_ssize_t nl = nlp - b;
    if (b[nl - 1] != '\r' || nl - 1 - start > max_line)
        return 0;
    const char *arg = b + start;
    Py_ssize_t alen = nl - 1 - start;
    if (memchr(arg, '\t', (size_t)alen) != NULL)
        return 0;
    /* Split on single spaces: 2 or 3 fields. */
    const char *sp1 = memchr(arg, ' ', (size_t)alen);
    if (sp1 == NULL)
        return 0;
    const char *rest = sp1 + 1;
    Py_ssize_t rlen = alen - (rest - arg);
    const char *sp2 = memchr(rest, ' ', (size_t)rlen);
    const char *reply = NULL, *size;
    Py_ssize_t slen = sp1 - arg, replen = 0, zlen;
    if (sp2 == NULL) {
        size = rest;
        zlen = rlen;
    } else {
        if (memchr(sp2 + 1, ' ', (size_t)(rlen - (sp2 + 1 - rest))) != NULL)
            return 0; /* four or more fields */
        reply = rest;
        replen = sp2 - rest;
        if (replen == 0)
            return 0;
        size = sp2 + 1;
        zlen = alen - (size - arg);
    }
    if (slen == 0 || zlen <= 0 || zlen > max_digits)
        return 0;
    Py_ssize_t plen = 0;
    for (Py_ssize_t i = 0; i < zlen; i++) {
        if (size[i] < '0' || size[i] > '9')
            return 0;
        plen = plen * 10 + (size[i] - '0');
    }
    Py_ssize_t body = nl + 1, end = body + plen;
    if (plen > max_payload || n < end + 2 || b[end] != '\r' || b[end + 1] != '\n')
        return 0;
    f->subj = arg;
    f->slen = slen;
    f->reply = reply;
    f->replen = replen;
    f->arg = arg;
    f->alen = alen;
    f->body = body;
    f->plen = plen;
    f->end = end;
    return 1;
}

/* refuse(subject, reply) for a frame whose subject or reply starts with '_' or
 * '$' (the first *character* of the decoded text is what Python tests; for '_'
 * and '$' that is the first byte: ASCII never starts an escape). 1 refused,
 * 0 taken, -1 error. */
static int
refused(PyObject *refuse, const pub_t *f)
{
    if (refuse == Py_None)
        return 0;
    if (!(f->subj[0] == '_' || f->subj[0] == '$' || (f->reply && (f->reply[0] == '_' || f->reply[0] == '$'))))
        return 0;
    PyObject *s = decode(f->subj, f->slen), *r = f->reply ? decode(f->reply, f->replen) : PyUnicode_FromString("");
    if (s == NULL || r == NULL) {
        Py_XDECREF(s);
        Py_XDECREF(r);
        return -1;
    }
    PyObject *v = PyObject_CallFunctionObjArgs(refuse, s, r, NULL);
    Py_DECREF(s);
    Py_DECREF(r);
    if (v == NULL)
        return -1;
    int yes = PyObject_IsTrue(v);
    Py_DECREF(v);
    return yes;
}

/* The limits every scan checks frames against (the codec's). */
typedef struct {
    Py_ssize_t max_line, max_payload, max_digits;
} limits_t;

/* A scan's loop over b[*pos..n): appends to out, advances *pos past what it
 * took; 0, or -1 with a Python error set. */
typedef int (*scan_loop)(const char *b, Py_ssize_t n, Py_ssize_t *pos, const limits_t *lim, PyObject *out,
                         PyObject *refuse);

/* The calling convention both scans share:
 * (buf, pos, max_line, max_payload, max_digits, out, refuse) -> new pos. */
static PyObject *
scan_with(PyObject *args, scan_loop loop)
{
    PyObject *bufobj, *out, *refuse;
    Py_ssize_t pos;
    limits_t lim;
    if (!PyArg_ParseTuple(args, "OnnnnO!O", &bufobj, &pos, &lim.max_line, &lim.max_payload, &lim.max_digits,
                          &PyList_Type, &out, &refuse))
        return NULL;
    Py_buffer pb;
    if (PyObject_GetBuffer(bufobj, &pb, PyBUF_SIMPLE) < 0)
        return NULL;
    int failed = loop((const char *)pb.buf, pb.len, &pos, &lim, out, refuse);
    PyBuffer_Release(&pb);
    if (failed)
        return NULL;
    return PyLong_FromSsize_t(pos);
}

static int
pubs_loop(const char *b, Py_ssize_t n, Py_ssize_t *at, const limits_t *lim, PyObject *out, PyObject *refuse)
{
    pub_t f;
    Py_ssize_t pos = *at;
    int failed = 0;
    while (parse_pub(b, n, pos, lim->max_line, lim->max_payload, lim->max_digits, &f)) {
        int no = refused(refuse, &f);
        if (no < 0) {
            failed = -1;
            break;
        }
        if (no)
            break;
        PyObject *item = Py_BuildValue("(NNNN)", decode(f.subj, f.slen),
                                       f.reply ? decode(f.reply, f.replen) : PyUnicode_FromString(""),
                                       PyByteArray_FromStringAndSize(f.arg, f.alen + 2),
                                       PyByteArray_FromStringAndSize(b + f.body, f.plen));
        if (item == NULL || PyList_Append(out, item) < 0) {
            Py_XDECREF(item);
            failed = -1;
            break;
        }
        Py_DECREF(item);
        pos = f.end + 2;
    }
    *at = pos;
    return failed;
}

/* scan_pubs(buf, pos, max_line, max_payload, max_digits, out, refuse) -> new pos */
static PyObject *
scan_pubs(PyObject *self, PyObject *args)
{
    return scan_with(args, pubs_loop);
}

static int
runs_loop(const char *b, Py_ssize_t n, Py_ssize_t *at, const limits_t *lim, PyObject *out, PyObject *refuse)
{
    pub_t f, first = {0};
    Py_ssize_t pos = *at, count = 0, nbytes = 0, run_start = pos;
    int failed = 0;
    for (;;) {
        int ok = parse_pub(b, n, pos, lim->max_line, lim->max_payload, lim->max_digits, &f);
        int same = ok && count && f.slen == first.slen && f.replen == first.replen
                   && memcmp(f.subj, first.subj, (size_t)f.slen) == 0
                   && (f.replen == 0 || memcmp(f.reply, first.reply, (size_t)f.replen) == 0);
        if (count && !same) { /* close the run */
            PyObject *item = Py_BuildValue("(NNnnnn)", decode(first.subj, first.slen),
                                           first.reply ? decode(first.reply, first.replen) : PyUnicode_FromString(""),
                                           count, nbytes, run_start, pos);
            if (item == NULL || PyList_Append(out, item) < 0) {
                Py_XDECREF(item);
                failed = -1;
                break;
            }
            Py_DECREF(item);
            count = 0;
        }
        if (!ok)
            break;
        if (!count) {
            int no = refused(refuse, &f);
            if (no < 0) {
                failed = -1;
                break;
            }
            if (no)
                break;
            first = f;
            run_start = pos;
            nbytes = 0;
        }
        count++;
        nbytes += f.plen;
        pos = f.end + 2;
    }
    *at = pos;
    return failed;
}

/* scan_runs(buf, pos, max_line, max_payload, max_digits, out, refuse) -> new pos
 *
 * The frames scan_pubs would take, grouped into runs of consecutive PUBs with
 * the same subject and reply bytes: one (subject, reply, count, payload_bytes,
 * start, end) per run, start..end the run's frames in buf. No object per
 * message: a publisher's stream of one subject (the usual producer) becomes one
 * tuple per receive, which render_msgs turns into each subscriber's MSG frames
 * (adapters/nats/pubscan.py; docs/nats.md "Performance"). refuse is asked once
 * per run: its answer depends on the subject and reply only. */
static PyObject *
scan_runs(PyObject *self, PyObject *args)
{
    return scan_with(args, runs_loop);
}

/* render_msgs(buf, start, end, count, sid) -> bytes
 *
 * The MSG frames for subscription ``sid`` of the ``count`` PUB frames at
 * buf[start:end] (a run from scan_runs: already checked): each
 * "PUB <subject> [reply] <size>\r\n<payload>\r\n" becomes
 * "MSG <subject> <sid> [reply] <size>\r\n<payload>\r\n", so the result is
 * exactly (end - start) + count * (len(sid) + 1) bytes, built in one pass. */
static PyObject *
render_msgs(PyObject *self, PyObject *args)
{
    PyObject *bufobj;
    Py_ssize_t start, end, count;
    const char *sid;
    Py_ssize_t sidlen;
    if (!PyArg_ParseTuple(args, "Onnny#", &bufobj, &start, &end, &count, &sid, &sidlen))
        return NULL;
    Py_buffer pb;
    if (PyObject_GetBuffer(bufobj, &pb, PyBUF_SIMPLE) < 0)
        return NULL;
    const char *b = (const char *)pb.buf;
    if (start < 0 || end > pb.len || start > end || count < 0) {
        PyBuffer_Release(&pb);
        PyErr_SetString(PyExc_ValueError, "render_msgs: run outside the buffer");
        return NULL;
    }
    PyObject *res = PyBytes_FromStringAndSize(NULL, (end - start) + count * (sidlen + 1));
    if (res == NULL) {
        PyBuffer_Release(&pb);
        return NULL;
    }
    char *o = PyBytes_AS_STRING(res), *o_end = o + PyBytes_GET_SIZE(res);
    Py_ssize_t pos = start, done = 0;
    while (pos < end && done < count) {
        /* "PUB " subject ' ' ... '\n' : the line, then <size> after its last space.
         * The LF is searched from the subject's second byte, as the scanner does: a
         * subject may start with an LF ("PUB \n 2\r\n", nats-server's parser), which
         * must not end the line (tests/fuzz/regressions/nats_server). */
        if (end - pos < 6)
            break;
        const char *line = b + pos + 4;
        const char *nl = memchr(line + 1, '\n', (size_t)(end - pos - 5));
        const char *sp = nl ? memchr(line, ' ', (size_t)(nl - line)) : NULL;
        if (sp == NULL)
            break;
        const char *digits = nl - 1;
        while (digits > sp && digits[-1] != ' ')
            digits--;
        Py_ssize_t plen = 0;
        for (const char *d = digits; d < nl - 1; d++)
            plen = plen * 10 + (*d - '0');
        Py_ssize_t head = sp - line, tail = (nl + 1) - sp, frame_end = (nl + 1 - b) + plen + 2;
        if (frame_end > end || o + 4 + head + 1 + sidlen + tail + plen + 2 > o_end)
            break;
        memcpy(o, "MSG ", 4);
        memcpy(o + 4, line, (size_t)head);
        o += 4 + head;
        *o++ = ' ';
        memcpy(o, sid, (size_t)sidlen);
        o += sidlen;
        memcpy(o, sp, (size_t)(tail + plen + 2)); /* " [reply ]<size>\r\n<payload>\r\n" */
        o += tail + plen + 2;
        pos = frame_end;
        done++;
    }
    PyBuffer_Release(&pb);
    if (done != count || pos != end || o != o_end) {
        Py_DECREF(res);
        PyErr_SetString(PyExc_ValueError, "render_msgs: the run is not the PUB frames scan_runs reported");
        return NULL;
    }
    return res;
}

static PyMethodDef methods[] = {
    {"scan_pubs", scan_pubs, METH_VARARGS, "Take the complete PUB frames at the front of a NATS receive."},
    {"scan_runs", scan_runs, METH_VARARGS, "The same frames, as runs of one subject and reply."},
    {"render_msgs", render_msgs, METH_VARARGS, "A run's PUB frames as MSG frames for one sid."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speedups", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModule_Create(&module);
}
