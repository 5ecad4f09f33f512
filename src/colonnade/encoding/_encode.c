/* Chunk payloads encoded in one call each without the GIL (see colonnade/encoding/packed.py
 * for the layout, and for the Python code whose payload this reproduces section for section,
 * which runs when this is unavailable):
 *
 *   pack_strings(validity, offsets, data, offset, n, wide, limit, schema, codec, level)
 *       -> (payload, m, lo, hi) or None
 *
 * A string (or binary) column of n rows, given as its Arrow buffers (validity bitmap or None,
 * int32 offsets, or int64 when wide, value bytes or None) and its offset into them, stored as
 * a packed dictionary: its values hashed once (in order of first appearance, as Arrow's
 * dictionary_encode numbers them), counted, ordered most frequent first (ties: first seen
 * first), each row's rank split into byte planes, the values' lengths and bytes one after the
 * other; each section compressed (codec 2: ZSTD at level, by the system's libzstd; 0: none)
 * when that makes it smaller. schema: section 0, the value type's IPC schema message. lo, hi:
 * the least and greatest value (bytewise, as Arrow orders strings), None without values.
 * None when the column has more than limit distinct values (limit < 0: no limit), so that the
 * caller stores it otherwise. ValueError names a malformed input. */

#include "buffers.h"
#include "zstd.h"
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HEAD 16

static inline uint64_t mix(uint64_t a, uint64_t b) {
    __uint128_t r = (__uint128_t)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

/* The first 16 bytes of the len at p (zero-padded; end: where the bytes readable from p end). */
static inline void words_of(const uint8_t *p, uint32_t len, const uint8_t *end, uint64_t *w0, uint64_t *w1) {
    if (end - p >= 16) {
        memcpy(w0, p, 8);
        memcpy(w1, p + 8, 8);
        if (len < 8) {
            *w0 = len ? *w0 & (~0ull >> (64 - 8 * len)) : 0;
            *w1 = 0;
        } else if (len < 16) {
            *w1 = len > 8 ? *w1 & (~0ull >> (128 - 8 * len)) : 0;
        }
    } else {
        uint8_t head[16] = {0};
        memcpy(head, p, len < 16 ? len : 16);
        memcpy(w0, head, 8);
        memcpy(w1, head + 8, 8);
    }
}

/* A 64-bit hash of len bytes whose first 16 are w0, w1 (8 bytes at a time, each folded in by a
 * 128-bit multiply). */
static inline uint64_t hash_of(const uint8_t *p, uint32_t len, uint64_t w0, uint64_t w1) {
    uint64_t h = mix(0x9E3779B97F4A7C15ull ^ len ^ w0, 0xBF58476D1CE4E5B9ull) ^ w1;
    if (len > 16) {
        p += 16;
        len -= 16;
        while (len >= 8) {
            uint64_t x;
            memcpy(&x, p, 8);
            h = mix(h ^ x, 0xBF58476D1CE4E5B9ull);
            p += 8;
            len -= 8;
        }
        uint64_t x = 0;
        memcpy(&x, p, len);
        h ^= x;
    }
    return mix(h, 0x94D049BB133111EBull);
}

static inline int width_of(uint64_t largest) { return largest < 1u << 8 ? 1 : largest < 1u << 16 ? 2 : 4; }

static inline void put_le32(uint8_t *p, uint32_t x) {
    p[0] = (uint8_t)x;
    p[1] = (uint8_t)(x >> 8);
    p[2] = (uint8_t)(x >> 16);
    p[3] = (uint8_t)(x >> 24);
}

/* Each thread's working buffers, kept from call to call (freed when the thread ends, or when
 * one has grown past SCRATCH_KEPT): buffers of a few hundred KB freshly allocated on every
 * call come from the kernel as zeroed pages each time, which took longer than the encoding. */
enum { S_IDS, S_RANK, S_BY_COUNT, S_VALIDITY, S_PLANES, S_SIZES, S_VALUES, S_PLACED, S_PAYLOAD, S_DISTINCT,
       S_ARENA, S_SLOTS, SCRATCHES };
#define SCRATCH_KEPT (16u << 20)

typedef struct {
    void *p[SCRATCHES];
    size_t room[SCRATCHES];
} Scratch;

static pthread_key_t scratch_key;
static int scratch_ready;

static void scratch_drop(void *item) {
    Scratch *s = item;
    for (int k = 0; k < SCRATCHES; k++) free(s->p[k]);
    free(s);
}

static Scratch *scratch(void) {
    Scratch *s = pthread_getspecific(scratch_key);
    if (s == NULL && (s = calloc(1, sizeof *s)) != NULL && pthread_setspecific(scratch_key, s) != 0) {
        free(s);
        s = NULL;
    }
    return s;
}

/* Buffer k of at least size bytes (its contents kept when keep), or NULL when out of memory. */
static void *room_for(Scratch *s, int k, size_t size, int keep) {
    if (s->room[k] < size) {
        size_t room = size > 2 * s->room[k] ? size : 2 * s->room[k];
        void *p;
        if (keep) {
            p = realloc(s->p[k], room);
        } else {
            free(s->p[k]);
            s->p[k] = NULL;
            s->room[k] = 0;
            p = malloc(room);
        }
        if (p == NULL) return NULL;
        s->p[k] = p;
        s->room[k] = room;
    }
    return s->p[k];
}

static void scratch_trim(Scratch *s) {
    for (int k = 0; k < SCRATCHES; k++) {
        if (s->room[k] > SCRATCH_KEPT) {
            free(s->p[k]);
            s->p[k] = NULL;
            s->room[k] = 0;
        }
    }
}

/* The distinct values of a column, numbered as first seen: their bytes one after another in
 * an arena of their own (compared there, not in the column: the arena stays in cache). */
typedef struct {
    uint64_t hash, w0, w1; /* w0, w1: the first 16 bytes, zero-padded */
    int64_t start;         /* in the arena */
    uint32_t len, count;
} Value;

typedef struct {
    Value *values;
    Py_ssize_t m, room;
    uint8_t *arena;
    int64_t used;
    uint32_t *slots; /* id + 1, 0 when empty */
    uint64_t mask;
} Distinct;

static int distinct_grow(Scratch *s, Distinct *d) {
    Py_ssize_t room = d->room ? 2 * d->room : 1024;
    if ((d->values = room_for(s, S_DISTINCT, sizeof(Value) * room, 1)) == NULL) return -1;
    uint64_t capacity = 2 * (uint64_t)room; /* load at most a half */
    if ((d->slots = room_for(s, S_SLOTS, sizeof(uint32_t) * capacity, 0)) == NULL) return -1;
    memset(d->slots, 0, sizeof(uint32_t) * capacity);
    for (Py_ssize_t id = 0; id < d->m; id++) {
        uint64_t at = d->values[id].hash & (capacity - 1);
        while (d->slots[at]) at = (at + 1) & (capacity - 1);
        d->slots[at] = (uint32_t)id + 1;
    }
    d->mask = capacity - 1;
    d->room = room;
    return 0;
}

static int arena_add(Scratch *s, Distinct *d, const uint8_t *p, int64_t len) {
    if ((d->arena = room_for(s, S_ARENA, (size_t)(d->used + len) + 1, 1)) == NULL) return -1;
    memcpy(d->arena + d->used, p, (size_t)len);
    d->used += len;
    return 0;
}

/* Compresses (or copies) raw into a section at out: raw length, stored length, bytes; returns
 * the bytes written, or 0 with *error set. */
static size_t put_section(uint8_t *out, const uint8_t *raw, size_t size, int codec, int level, ZSTD_CCtx *ctx,
                          const char **error) {
    size_t stored = size;
    if (codec == 2 && size) {
        size_t got = zstd_compress(ctx, out + 8, zstd_bound(size), raw, size, level);
        if (zstd_is_error(got)) {
            *error = zstd_error_name(got);
            return 0;
        }
        if (got < size) stored = got;
    }
    if (stored == size && size) memcpy(out + 8, raw, size);
    put_le32(out, (uint32_t)size);
    put_le32(out + 4, (uint32_t)stored);
    return 8 + stored;
}

typedef struct {
    /* input */
    const uint8_t *bits, *data;
    const void *offsets;
    int wide;
    Py_ssize_t offset, n, data_len, limit;
    const uint8_t *schema;
    Py_ssize_t schema_len;
    int codec, level;
    /* output */
    uint8_t *payload;
    size_t payload_len;
    Py_ssize_t m, lo, hi; /* lo, hi: ids, -1 without values */
    uint8_t *bounds; /* their bytes, one after the other */
    int64_t lo_len, hi_len;
    int over;             /* more than limit distinct values */
    const char *error;
} Job;

static inline int64_t offset_at(const Job *job, Py_ssize_t i) {
    return job->wide ? ((const int64_t *)job->offsets)[i] : ((const int32_t *)job->offsets)[i];
}

static inline int less(const Distinct *d, Py_ssize_t a, Py_ssize_t b) {
    const Value *x = &d->values[a], *y = &d->values[b];
    int c = memcmp(d->arena + x->start, d->arena + y->start, x->len < y->len ? x->len : y->len);
    return c < 0 || (c == 0 && x->len < y->len);
}

/* Row i of the column counted (its value found, or added as the next distinct value; ids[v]
 * its id): 0, or 1 when that would pass the limit, -1 on an error (job->error set). */
static inline int add_row(Job *job, Scratch *sc, Distinct *d, Py_ssize_t i, uint32_t *id_out) {
    int64_t s = offset_at(job, i), e = offset_at(job, i + 1);
    if (s < 0 || e < s || e > job->data_len) {
        job->error = "string offsets out of range";
        return -1;
    }
    const uint8_t *p = job->data + s;
    uint32_t len = (uint32_t)(e - s);
    uint64_t w0, w1;
    words_of(p, len, job->data + job->data_len, &w0, &w1);
    uint64_t h = hash_of(p, len, w0, w1);
    uint64_t at = h & d->mask;
    for (;;) {
        uint32_t slot = d->slots[at];
        if (slot == 0) break;
        const Value *x = &d->values[slot - 1];
        if (x->hash == h && x->len == len && x->w0 == w0 && x->w1 == w1 &&
            (len <= 16 || memcmp(d->arena + x->start + 16, p + 16, len - 16) == 0)) {
            d->values[slot - 1].count++;
            *id_out = slot - 1;
            return 0;
        }
        at = (at + 1) & d->mask;
    }
    if (job->limit >= 0 && d->m >= job->limit) return 1;
    if (d->m == d->room) {
        if (distinct_grow(sc, d) < 0) goto oom;
        at = h & d->mask;
        while (d->slots[at]) at = (at + 1) & d->mask;
    }
    uint32_t id = (uint32_t)d->m++;
    d->values[id] = (Value){h, w0, w1, d->used, len, 1};
    if (arena_add(sc, d, p, len) < 0) goto oom;
    d->slots[at] = id + 1;
    if (job->lo < 0 || less(d, id, job->lo)) job->lo = id;
    if (job->hi < 0 || less(d, job->hi, id)) job->hi = id;
    *id_out = id;
    return 0;
oom:
    job->error = "out of memory";
    return -1;
}

/* 64 bits of a bitmap from bit at on (bits: at least at + rows bits), the rows past rows zero. */
static inline uint64_t bits_from(const uint8_t *bits, Py_ssize_t at, Py_ssize_t rows) {
    uint64_t word = 0;
    Py_ssize_t first = at >> 3, last = (at + rows - 1) >> 3;
    for (Py_ssize_t k = first; k <= last && k - first < 8; k++) word |= (uint64_t)bits[k] << (8 * (k - first));
    word >>= at & 7;
    if ((at & 7) && last - first == 8) word |= (uint64_t)bits[last] << (64 - (at & 7));
    return rows >= 64 ? word : word & ((1ull << rows) - 1);
}

/* Everything but the Python objects; run without the GIL. */
static void run(Job *job) {
    Distinct d = {0};
    uint32_t *ids, *rank, *by_count;
    uint8_t *validity, *planes, *sizes, *values;
    int64_t *placed;
    ZSTD_CCtx *ctx = NULL;
    Py_ssize_t n = job->n, v = 0;
    job->lo = job->hi = -1;
    Scratch *sc = scratch();
    if (sc == NULL) goto oom;
    if ((ids = room_for(sc, S_IDS, sizeof(uint32_t) * (n ? n : 1), 0)) == NULL || distinct_grow(sc, &d) < 0) goto oom;
    int found = 0;
    if (job->bits == NULL) {
        for (Py_ssize_t r = 0; r < n && found == 0; r++) found = add_row(job, sc, &d, job->offset + r, &ids[v++]);
    } else {
        /* the rows with a value, a word of the bitmap at a time (nulls are often at random) */
        for (Py_ssize_t r = 0; r < n && found == 0; r += 64) {
            uint64_t word = bits_from(job->bits, job->offset + r, n - r < 64 ? n - r : 64);
            while (word && found == 0) {
                found = add_row(job, sc, &d, job->offset + r + __builtin_ctzll(word), &ids[v++]);
                word &= word - 1;
            }
        }
    }
    if (found != 0) {
        job->over = found > 0;
        goto done;
    }
    Py_ssize_t m = d.m;
    job->m = m;
    if (m) { /* copied out when the arena is freed */
        const Value *lo = &d.values[job->lo], *hi = &d.values[job->hi];
        if ((job->bounds = malloc((size_t)lo->len + hi->len + 1)) == NULL) goto oom;
        memcpy(job->bounds, d.arena + lo->start, lo->len);
        memcpy(job->bounds + lo->len, d.arena + hi->start, hi->len);
        job->lo_len = lo->len;
        job->hi_len = hi->len;
    }
    /* ranks: most frequent first, ties in the order first seen (a stable counting sort) */
    uint32_t top = 0;
    for (Py_ssize_t id = 0; id < m; id++) top = d.values[id].count > top ? d.values[id].count : top;
    if ((rank = room_for(sc, S_RANK, sizeof(uint32_t) * (m ? m : 1), 0)) == NULL ||
        (by_count = room_for(sc, S_BY_COUNT, sizeof(uint32_t) * ((size_t)top + 2), 0)) == NULL)
        goto oom;
    memset(by_count, 0, sizeof(uint32_t) * ((size_t)top + 2));
    for (Py_ssize_t id = 0; id < m; id++) by_count[top - d.values[id].count + 1]++;
    for (uint32_t c = 1; c <= top + 1; c++) by_count[c] += by_count[c - 1];
    for (Py_ssize_t id = 0; id < m; id++) rank[id] = by_count[top - d.values[id].count]++;
    int w = width_of(m ? (uint64_t)(m - 1) : 0);
    int64_t longest = 0, total = 0;
    for (Py_ssize_t id = 0; id < m; id++) {
        longest = d.values[id].len > longest ? d.values[id].len : longest;
        total += d.values[id].len;
    }
    int lw = width_of((uint64_t)longest);
    Py_ssize_t nulls = n - v, bits_len = nulls ? (n + 7) / 8 : 0;
    if ((planes = room_for(sc, S_PLANES, (size_t)v * w + 1, 0)) == NULL ||
        (sizes = room_for(sc, S_SIZES, (size_t)m * lw + 1, 0)) == NULL ||
        (values = room_for(sc, S_VALUES, (size_t)total + 1, 0)) == NULL ||
        (validity = room_for(sc, S_VALIDITY, (size_t)bits_len + 1, 0)) == NULL)
        goto oom;
    memset(validity, 0, (size_t)bits_len);
    for (Py_ssize_t j = 0; j < v; j++) {
        uint32_t x = rank[ids[j]];
        planes[j] = (uint8_t)x;
        if (w >= 2) planes[v + j] = (uint8_t)(x >> 8);
        if (w == 4) {
            planes[2 * v + j] = (uint8_t)(x >> 16);
            planes[3 * v + j] = (uint8_t)(x >> 24);
        }
    }
    /* the values in rank order: their lengths, then their bytes */
    if ((placed = room_for(sc, S_PLACED, sizeof(int64_t) * (m + 1), 0)) == NULL) goto oom;
    for (Py_ssize_t id = 0; id < m; id++) placed[rank[id]] = id;
    int64_t at = 0;
    for (Py_ssize_t k = 0; k < m; k++) {
        Py_ssize_t id = placed[k];
        uint64_t len = d.values[id].len;
        for (int b = 0; b < lw; b++) sizes[k * lw + b] = (uint8_t)(len >> (8 * b));
        memcpy(values + at, d.arena + d.values[id].start, (size_t)len);
        at += (int64_t)len;
    }
    if (nulls) {
        for (Py_ssize_t r = 0; r < n; r++) {
            Py_ssize_t i = job->offset + r;
            validity[r >> 3] |= (uint8_t)(((job->bits[i >> 3] >> (i & 7)) & 1) << (r & 7));
        }
    }
    const uint8_t *raw[4] = {validity, planes, sizes, values};
    size_t raw_len[4] = {(size_t)bits_len, (size_t)v * w, (size_t)m * lw, (size_t)total};
    size_t room = HEAD + 8 + (size_t)job->schema_len;
    for (int k = 0; k < 4; k++) room += 8 + (job->codec == 2 ? zstd_bound(raw_len[k]) : raw_len[k]);
    if ((job->payload = room_for(sc, S_PAYLOAD, room, 0)) == NULL) goto oom;
    if (job->codec == 2 && (ctx = take_compressor()) == NULL) goto oom;
    uint8_t *out = job->payload;
    out[0] = (uint8_t)job->codec;
    out[1] = (uint8_t)w;
    out[2] = (uint8_t)lw;
    out[3] = 0;
    put_le32(out + 4, (uint32_t)n);
    put_le32(out + 8, (uint32_t)v);
    put_le32(out + 12, (uint32_t)m);
    size_t len = HEAD + put_section(out + HEAD, job->schema, (size_t)job->schema_len, 0, 0, NULL, &job->error);
    for (int k = 0; k < 4 && job->error == NULL; k++)
        len += put_section(out + len, raw[k], raw_len[k], job->codec, job->level, ctx, &job->error);
    job->payload_len = len;
    goto done;
oom:
    job->error = "out of memory";
done:
    give_compressor(ctx);
    if (job->error != NULL || job->over) {
        free(job->bounds);
        job->bounds = NULL;
    }
}

static PyObject *pack_strings(PyObject *self, PyObject *args) {
    PyObject *validity_obj, *offsets_obj, *data_obj, *schema_obj;
    Py_ssize_t offset, n, limit;
    int wide, codec, level;
    if (!PyArg_ParseTuple(args, "OOOnnpnOii", &validity_obj, &offsets_obj, &data_obj, &offset, &n, &wide, &limit,
                          &schema_obj, &codec, &level))
        return NULL;
    if (offset < 0 || n < 0 || n > UINT32_MAX || (codec != 0 && codec != 2)) {
        PyErr_SetString(PyExc_ValueError, "pack_strings: invalid arguments");
        return NULL;
    }
    if (codec == 2 && !zstd_compresses) {
        PyErr_SetString(PyExc_ValueError, "pack_strings: libzstd was not found");
        return NULL;
    }
    Buf bits = {.held = 0}, offsets = {.held = 0}, data = {.held = 0}, schema = {.held = 0};
    PyObject *result = NULL;
    Job job = {0};
    if ((validity_obj != Py_None && get_buf(validity_obj, &bits, 0, 1, "validity") < 0) ||
        get_buf(offsets_obj, &offsets, 0, 1, "offsets") < 0 ||
        (data_obj != Py_None && get_buf(data_obj, &data, 0, 1, "data") < 0) ||
        get_buf(schema_obj, &schema, 0, 1, "schema") < 0)
        goto done;
    if ((offsets.view.len / (wide ? 8 : 4)) < offset + n + 1 || (bits.held && bits.view.len * 8 < offset + n)) {
        PyErr_SetString(PyExc_ValueError, "pack_strings: buffers shorter than the column");
        goto done;
    }
    job.bits = bits.held ? bits.view.buf : NULL;
    job.data = data.held ? data.view.buf : (const uint8_t *)"";
    job.data_len = data.held ? data.view.len : 0;
    job.offsets = offsets.view.buf;
    job.wide = wide;
    job.offset = offset;
    job.n = n;
    job.limit = limit;
    job.schema = schema.view.buf;
    job.schema_len = schema.view.len;
    job.codec = codec;
    job.level = level;
    Py_BEGIN_ALLOW_THREADS
    run(&job);
    Py_END_ALLOW_THREADS
    if (job.error != NULL) {
        PyErr_Format(PyExc_ValueError, "pack_strings: %s", job.error);
        goto done;
    }
    if (job.over) {
        Py_INCREF(Py_None);
        result = Py_None;
        goto done;
    }
    if (job.m)
        result = Py_BuildValue("(y#ny#y#)", (const char *)job.payload, (Py_ssize_t)job.payload_len, job.m,
                               (const char *)job.bounds, (Py_ssize_t)job.lo_len,
                               (const char *)job.bounds + job.lo_len, (Py_ssize_t)job.hi_len);
    else
        result = Py_BuildValue("(y#nOO)", (const char *)job.payload, (Py_ssize_t)job.payload_len, job.m, Py_None, Py_None);
done:
    free(job.bounds);
    if (job.payload != NULL) scratch_trim(scratch()); /* the payload was copied into result */
    release(&bits);
    release(&offsets);
    release(&data);
    release(&schema);
    return result;
}

static PyMethodDef methods[] = {
    {"pack_strings", pack_strings, METH_VARARGS, "A string column as a packed dictionary payload, without the GIL."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_encode", NULL, -1, methods};

PyMODINIT_FUNC PyInit__encode(void) {
    load_zstd();
    if (!scratch_ready) {
        if (pthread_key_create(&scratch_key, scratch_drop) != 0) {
            PyErr_SetString(PyExc_RuntimeError, "_encode: no thread-local storage");
            return NULL;
        }
        scratch_ready = 1;
    }
    PyObject *mod = PyModule_Create(&module);
    if (mod != NULL && PyModule_AddIntConstant(mod, "ZSTD", zstd_compresses) < 0) {
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
