/* Little-endian field access shared by Ferry's C extensions (core/_speedups.c,
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

#endif
