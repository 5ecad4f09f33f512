/* Values put at the rows a validity bitmap marks, shared by the compiled passes of a scan
 * (_scan.c) and the compiled chunk decoders (_packed.c). */

#ifndef COLONNADE_PLACE_H
#define COLONNADE_PLACE_H

#include <stdint.h>
#include <string.h>

static inline int bit_at(const uint8_t *bits, Py_ssize_t i) { return (bits[i >> 3] >> (i & 7)) & 1; }

/* place_IN_OUT(src, v, bits, n, dst): dst[r] = the next of src's v values (unsigned IN, as
 * OUT) for every row r of n the bitmap marks (least significant bit first; all rows when bits
 * is NULL), 0 for the other rows and for marked rows beyond the values; returns the rows
 * marked (the caller compares it with v). Branch-free on the bits of a byte that mixes nulls
 * and values: a third of GDELT's names are null, at random. */
#define PLACE(IN, OUT)                                                                            \
    static Py_ssize_t place_##IN##_##OUT(const IN *src, Py_ssize_t v, const uint8_t *bits, Py_ssize_t n, \
                                         OUT *dst) {                                              \
        Py_ssize_t r = 0, taken = 0, marked;                                                      \
        if (bits == NULL) {                                                                       \
            for (; r < n && r < v; r++) dst[r] = (OUT)src[r];                                     \
            for (; r < n; r++) dst[r] = 0;                                                        \
            return n;                                                                             \
        }                                                                                         \
        for (; r + 8 <= n && taken + 8 <= v; r += 8) {                                            \
            uint8_t byte = bits[r >> 3];                                                          \
            if (byte == 0xff) {                                                                   \
                for (int k = 0; k < 8; k++) dst[r + k] = (OUT)src[taken + k];                     \
                taken += 8;                                                                       \
            } else if (byte == 0) {                                                               \
                memset(dst + r, 0, 8 * sizeof(OUT));                                              \
            } else { /* src[taken + 7] is in bounds here */                                       \
                for (int k = 0; k < 8; k++) {                                                     \
                    IN b = (IN)((byte >> k) & 1);                                                 \
                    dst[r + k] = (OUT)(src[taken] & (IN)((IN)0 - b));                             \
                    taken += (Py_ssize_t)b;                                                       \
                }                                                                                 \
            }                                                                                     \
        }                                                                                         \
        marked = taken;                                                                           \
        for (; r < n; r++) {                                                                      \
            if (bit_at(bits, r)) {                                                                \
                marked++;                                                                         \
                dst[r] = taken < v ? (OUT)src[taken++] : 0;                                       \
            } else {                                                                              \
                dst[r] = 0;                                                                       \
            }                                                                                     \
        }                                                                                         \
        return marked;                                                                            \
    }

#endif
