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

/* scan_pubs(buf, pos, max_line, max_payload, max_digits, out, refuse) -> new pos */
static PyObject *
scan_pubs(PyObject *self, PyObject *args)
{
    PyObject *bufobj, *out, *refuse;
    Py_ssize_t pos, max_line, max_payload, max_digits;
    if (!PyArg_ParseTuple(args, "OnnnnO!O", &bufobj, &pos, &max_line, &max_payload, &max_digits,
                          &PyList_Type, &out, &refuse))
        return NULL;
    Py_buffer pb;
    if (PyObject_GetBuffer(bufobj, &pb, PyBUF_SIMPLE) < 0)
        return NULL;
    const char *b = (const char *)pb.buf;
    Py_ssize_t n = pb.len;
    int failed = 0;
    while (pos >= 0 && n - pos >= 4 && memcmp(b + pos, "PUB ", 4) == 0) {
        Py_ssize_t start = pos + 4;
        if (start + 1 > n)
            break;
        const char *nlp = memchr(b + start + 1, '\n', (size_t)(n - start - 1));
        if (nlp == NULL)
            break;
        Py_ssize_t nl = nlp - b;
        if (b[nl - 1] != '\r' || nl - 1 - start > max_line)
            break;
        const char *arg = b + start;
        Py_ssize_t alen = nl - 1 - start;
        if (memchr(arg, '\t', (size_t)alen) != NULL)
            break;
        /* Split on single spaces: 2 or 3 fields. */
        const char *sp1 = memchr(arg, ' ', (size_t)alen);
        if (sp1 == NULL)
            break;
        const char *rest = sp1 + 1;
        Py_ssize_t rlen = alen - (rest - arg);
        const char *sp2 = memchr(rest, ' ', (size_t)rlen);
        const char *subj = arg, *reply = NULL, *size;
        Py_ssize_t slen = sp1 - arg, replen = 0, zlen;
        if (sp2 == NULL) {
            size = rest;
            zlen = rlen;
        } else {
            if (memchr(sp2 + 1, ' ', (size_t)(rlen - (sp2 + 1 - rest))) != NULL)
                break; /* four or more fields */
            reply = rest;
            replen = sp2 - rest;
            if (replen == 0)
                break;
            size = sp2 + 1;
            zlen = alen - (size - arg);
        }
        if (slen == 0 || zlen <= 0 || zlen > max_digits)
            break;
        Py_ssize_t plen = 0;
        int digits = 1;
        for (Py_ssize_t i = 0; i < zlen; i++) {
            if (size[i] < '0' || size[i] > '9') {
                digits = 0;
                break;
            }
            plen = plen * 10 + (size[i] - '0');
        }
        if (!digits)
            break;
        Py_ssize_t body = nl + 1, end = body + plen;
        if (plen > max_payload || n < end + 2 || b[end] != '\r' || b[end + 1] != '\n')
            break;
        if (refuse != Py_None && (subj[0] == '_' || subj[0] == '$' || (reply && (reply[0] == '_' || reply[0] == '$')))) {
            /* The first *character* of the decoded text is what Python tests; for
             * '_' and '$' that is the first byte (ASCII never starts an escape). */
            PyObject *s = decode(subj, slen), *r = reply ? decode(reply, replen) : PyUnicode_FromString("");
            if (s == NULL || r == NULL) {
                Py_XDECREF(s);
                Py_XDECREF(r);
                failed = 1;
                break;
            }
            PyObject *v = PyObject_CallFunctionObjArgs(refuse, s, r, NULL);
            Py_DECREF(s);
            Py_DECREF(r);
            if (v == NULL) {
                failed = 1;
                break;
            }
            int yes = PyObject_IsTrue(v);
            Py_DECREF(v);
            if (yes < 0) {
                failed = 1;
                break;
            }
            if (yes)
                break;
        }
        PyObject *item = Py_BuildValue("(NNNN)", decode(subj, slen),
                                       reply ? decode(reply, replen) : PyUnicode_FromString(""),
                                       PyByteArray_FromStringAndSize(arg, alen + 2),
                                       PyByteArray_FromStringAndSize(b + body, plen));
        if (item == NULL || PyList_Append(out, item) < 0) {
            Py_XDECREF(item);
            failed = 1;
            break;
        }
        Py_DECREF(item);
        pos = end + 2;
    }
    PyBuffer_Release(&pb);
    if (failed)
        return NULL;
    return PyLong_FromSsize_t(pos);
}

static PyMethodDef methods[] = {
    {"scan_pubs", scan_pubs, METH_VARARGS, "Take the complete PUB frames at the front of a NATS receive."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speedups", NULL, -1, methods};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModule_Create(&module);
}
