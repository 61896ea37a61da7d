/* Little-endian field access (and strict UTF-8) shared by Ferry's C extensions (core/_speedups.c,
 * adapters/iggy/_speedups.c, adapters/spark/_speedups.c). Every wire and stored
 * layout they read is little-endian (core/record.py, iggy.md); memcpy keeps the
 * unaligned reads legal and compiles to one load on the hosts Ferry runs on. */
#ifndef FERRY_SPEEDUPS_LE_H
#define FERRY_SPEEDUPS_LE_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

static inline uint64_t rd64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint32_t rd32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline void wr64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static inline void wr32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }

/* 0 on a little-endian host; else sets ImportError naming `module` (the module
 * then fails to import and Ferry runs its Python loops, core/compiled.py). */
static inline int
ferry_require_little_endian(const char *module)
{
    const uint16_t probe = 1;
    if (*(const unsigned char *)&probe == 1)
        return 0;
    PyErr_Format(PyExc_ImportError, "%s needs a little-endian host", module);
    return -1;
}

/* Strict UTF-8, as Python's decoder: no overlong forms, no surrogates, nothing
 * past U+10FFFF (core/_speedups.c's header values, adapters/kafka/_speedups.c's
 * header names and values). */
static inline int
ferry_utf8_ok(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF)
            need = 1;
        else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0) lo = 0xA0;       /* overlong */
            else if (c == 0xED) hi = 0x9F;  /* surrogates */
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0) lo = 0x90;       /* overlong */
            else if (c == 0xF4) hi = 0x8F;  /* past U+10FFFF */
        } else
            return 0;
        if (n - i - 1 < need)
            return 0;
        if (s[i + 1] < lo || s[i + 1] > hi)
            return 0;
        for (size_t k = 2; k <= need; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF)
                return 0;
        i += need + 1;
    }
    return 1;
}

#endif
