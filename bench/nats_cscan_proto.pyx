# cython: language_level=3, boundscheck=False, wraparound=False
# Prototype only (docs/nats.md "Performance"): ServerCodec.scan_pubs with C loops.
# Not built by CI or `make`. Build: pip install cython; cythonize -i -3 bench/nats_cscan_proto.pyx
# then: PYTHONPATH=bench .venv/bin/python bench/nats_inproc.py --codec-proto --size 128
from libc.string cimport memchr
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE

def scan_pubs(bytearray buf, Py_ssize_t pos, list out, Py_ssize_t max_line=4096,
              Py_ssize_t max_payload=1048576):
    cdef char* base = PyByteArray_AS_STRING(buf)
    cdef Py_ssize_t n = PyByteArray_GET_SIZE(buf)
    cdef Py_ssize_t start, nl, i, sp1, sp2, size, body, end, k
    cdef char* p
    cdef char c
    while pos + 4 <= n and base[pos] == b'P' and base[pos+1] == b'U' and base[pos+2] == b'B' and base[pos+3] == b' ':
        start = pos + 4
        if start + 1 >= n: break
        p = <char*>memchr(base + start + 1, b'\n', n - start - 1)
        if p == NULL: break
        nl = p - base
        if base[nl-1] != b'\r' or nl - 1 - start > max_line: break
        sp1 = -1; sp2 = -1; k = 0
        for i in range(start, nl - 1):
            c = base[i]
            if c == b' ':
                if k == 0: sp1 = i
                elif k == 1: sp2 = i
                k += 1
            elif c == b'\t':
                k = 9; break
        if k == 1:
            if sp1 == start or sp1 + 1 == nl - 1: break
            size = 0
            if nl - 1 - (sp1 + 1) > 9: break
            for i in range(sp1 + 1, nl - 1):
                c = base[i]
                if c < b'0' or c > b'9': size = -1; break
                size = size * 10 + (c - 48)
            if size < 0: break
            reply = ""
        elif k == 2:
            if sp1 == start or sp2 == sp1 + 1 or sp2 + 1 == nl - 1: break
            if nl - 1 - (sp2 + 1) > 9: break
            size = 0
            for i in range(sp2 + 1, nl - 1):
                c = base[i]
                if c < b'0' or c > b'9': size = -1; break
                size = size * 10 + (c - 48)
            if size < 0: break
            reply = base[sp1+1:sp2].decode("utf-8", "surrogateescape")
        else:
            break
        body = nl + 1
        end = body + size
        if size > max_payload or n < end + 2 or base[end] != b'\r' or base[end+1] != b'\n': break
        subject = base[start:sp1].decode("utf-8", "surrogateescape")
        out.append((subject, reply, buf[start:nl-1], buf[body:end]))
        pos = end + 2
    return pos
