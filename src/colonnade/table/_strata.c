/* Compiled passes of a stratified sample's admission (see colonnade/table/strata.py, whose
 * NumPy code is the reference these passes reproduce given the same keys), and the look-up of
 * an append's key strings in their shared dictionary (see KeyEncoding in sample_rows.py).
 *
 * Every function takes contiguous buffers that the caller allocated (NumPy arrays), checks
 * their sizes and the indices it follows, and runs without the GIL. */

#include "buffers.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The signed integer at position i of a buffer of 1, 2, 4 or 8-byte items. */
static inline int64_t int_at(const void *p, Py_ssize_t itemsize, Py_ssize_t i) {
    switch (itemsize) {
    case 1: return ((const int8_t *)p)[i];
    case 2: return ((const int16_t *)p)[i];
    case 4: return ((const int32_t *)p)[i];
    default: return ((const int64_t *)p)[i];
    }
}

#define MAX_COLUMNS 16

/* combine(indices, widths, table, out) -> rows without an id
 *
 * out[r] = table[((indices[0][r] * widths[1] + indices[1][r]) * widths[2] + ...)]: the stratum
 * id of every row from each key column's value index (-1 where the table has none yet). */
static PyObject *combine(PyObject *self, PyObject *args) {
    PyObject *indices, *widths, *table_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OOOO", &indices, &widths, &table_obj, &out_obj)) return NULL;
    if (!PyTuple_Check(indices) || !PyTuple_Check(widths) || PyTuple_GET_SIZE(indices) != PyTuple_GET_SIZE(widths)) {
        PyErr_SetString(PyExc_TypeError, "combine: indices and widths must be tuples of one length");
        return NULL;
    }
    Py_ssize_t k = PyTuple_GET_SIZE(indices);
    if (k < 1 || k > MAX_COLUMNS) {
        PyErr_SetString(PyExc_ValueError, "combine: 1 to 16 key columns");
        return NULL;
    }
    Buf cols[MAX_COLUMNS], table, out;
    int64_t w[MAX_COLUMNS];
    Py_ssize_t n = -1, made = 0;
    PyObject *result = NULL;
    table.held = out.held = 0;
    for (Py_ssize_t j = 0; j < k; j++) {
        w[j] = PyLong_AsLongLong(PyTuple_GET_ITEM(widths, j));
        if (w[j] == -1 && PyErr_Occurred()) goto done;
        if (get_buf(PyTuple_GET_ITEM(indices, j), &cols[j], 0, 0, "indices") < 0) { made = j + 1; goto done; }
        made = j + 1;
        Py_ssize_t s = cols[j].view.itemsize;
        if (s != 1 && s != 2 && s != 4 && s != 8) {
            PyErr_SetString(PyExc_TypeError, "combine: integer indices expected");
            goto done;
        }
        if (n >= 0 && count_of(&cols[j]) != n) {
            PyErr_SetString(PyExc_ValueError, "combine: index arrays of different lengths");
            goto done;
        }
        n = count_of(&cols[j]);
    }
    if (get_buf(table_obj, &table, 0, 8, "table") < 0 || get_buf(out_obj, &out, 1, 8, "out") < 0) goto done;
    if (count_of(&out) != n) {
        PyErr_SetString(PyExc_ValueError, "combine: out must have a row per index");
        goto done;
    }
    int64_t total = 1;
    for (Py_ssize_t j = 0; j < k; j++) total *= w[j];
    if (total != count_of(&table)) {
        PyErr_SetString(PyExc_ValueError, "combine: the table must have an entry per combination");
        goto done;
    }
    const int64_t *tab = table.view.buf;
    int64_t *o = out.view.buf;
    Py_ssize_t missing = 0, bad = 0;
    Py_BEGIN_ALLOW_THREADS
    if (k == 2 && cols[0].view.itemsize == 4 && cols[1].view.itemsize == 4) {
        /* two columns of int32 indices (dictionary-encoded strings): the common case */
        const int32_t *a = cols[0].view.buf, *b = cols[1].view.buf;
        uint64_t w0 = (uint64_t)w[0], w1 = (uint64_t)w[1];
        for (Py_ssize_t r = 0; r < n; r++) {
            uint64_t x = (uint64_t)(int64_t)a[r], y = (uint64_t)(int64_t)b[r];
            if (x >= w0 || y >= w1) { bad = 1; break; }
            int64_t id = tab[x * w1 + y];
            o[r] = id;
            missing += id < 0;
        }
    } else {
        for (Py_ssize_t r = 0; r < n && !bad; r++) {
            int64_t code = 0;
            for (Py_ssize_t j = 0; j < k; j++) {
                int64_t v = int_at(cols[j].view.buf, cols[j].view.itemsize, r);
                if (v < 0 || v >= w[j]) { bad = 1; break; }
                code = code * w[j] + v;
            }
            if (bad) break;
            int64_t id = tab[code];
            o[r] = id;
            missing += id < 0;
        }
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "combine: a value index outside its column's values");
        goto done;
    }
    result = PyLong_FromSsize_t(missing);
done:
    for (Py_ssize_t j = 0; j < made; j++) release(&cols[j]);
    release(&table);
    release(&out);
    return result;
}

/* count(ids, counts): counts[s] = rows of stratum s (counts zeroed first). */
static PyObject *count(PyObject *self, PyObject *args) {
    PyObject *ids_obj, *counts_obj;
    if (!PyArg_ParseTuple(args, "OO", &ids_obj, &counts_obj)) return NULL;
    Buf ids, counts;
    PyObject *result = NULL;
    ids.held = counts.held = 0;
    if (get_buf(ids_obj, &ids, 0, 8, "ids") < 0 || get_buf(counts_obj, &counts, 1, 8, "counts") < 0) goto done;
    Py_ssize_t n = count_of(&ids), size = count_of(&counts), bad = 0;
    const int64_t *id = ids.view.buf;
    int64_t *c = counts.view.buf;
    Py_BEGIN_ALLOW_THREADS
    memset(c, 0, size * sizeof(int64_t));
    for (Py_ssize_t r = 0; r < n; r++) {
        int64_t s = id[r];
        if (s < 0 || s >= size) { bad = 1; break; }
        c[s]++;
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "count: a stratum id outside the strata");
        goto done;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    release(&ids);
    release(&counts);
    return result;
}

/* xoshiro256+ (Blackman and Vigna), seeded by splitmix64: the uniform keys of rows, rounded to
 * the nearest single-precision value below 1 (a sample stores its keys as float32; see
 * row_keys.py). */
static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline double next_key(uint64_t *s) {
    uint64_t result = s[0] + s[3], t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    float key = (float)((double)(result >> 11) * 0x1.0p-53);
    return key < 1.0f ? (double)key : (double)0x1.fffffep-1f;
}

static void seed_state(uint64_t seed, uint64_t *s) {
    for (int i = 0; i < 4; i++) {
        uint64_t z = (seed += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        s[i] = z ^ (z >> 31);
    }
}

/* scan(ids, keys, seed, fraction, above, bound, rows, out_keys, candidate, hits, got) -> m
 *
 * Each row's key (keys[r], or drawn from ``seed`` when keys is None) decides it: a row of a
 * stratum at the floor (above[s] == 0, bound[s] == ``fraction``) is kept when its key is at
 * most ``fraction`` (hits[s] counts them); a row of a stratum above it is a candidate when its
 * key is at most bound[s] (got[s] counts them). The first m entries of rows, out_keys and candidate (1 for a
 * candidate) list them in row order. */
static PyObject *scan(PyObject *self, PyObject *args) {
    PyObject *ids_obj, *keys_obj, *above_obj, *bound_obj, *rows_obj, *okeys_obj, *cand_obj, *hits_obj, *got_obj;
    unsigned long long seed;
    double fraction;
    if (!PyArg_ParseTuple(args, "OOKdOOOOOOO", &ids_obj, &keys_obj, &seed, &fraction, &above_obj, &bound_obj,
                          &rows_obj, &okeys_obj, &cand_obj, &hits_obj, &got_obj))
        return NULL;
    Buf ids, keys, above, bound, rows, okeys, cand, hits, got;
    ids.held = keys.held = above.held = bound.held = rows.held = okeys.held = cand.held = hits.held = got.held = 0;
    PyObject *result = NULL;
    int given = keys_obj != Py_None;
    if (get_buf(ids_obj, &ids, 0, 8, "ids") < 0 || (given && get_buf(keys_obj, &keys, 0, 8, "keys") < 0) ||
        get_buf(above_obj, &above, 0, 1, "above") < 0 || get_buf(bound_obj, &bound, 0, 8, "bound") < 0 ||
        get_buf(rows_obj, &rows, 1, 8, "rows") < 0 || get_buf(okeys_obj, &okeys, 1, 8, "out_keys") < 0 ||
        get_buf(cand_obj, &cand, 1, 1, "candidate") < 0 || get_buf(hits_obj, &hits, 1, 8, "hits") < 0 ||
        get_buf(got_obj, &got, 1, 8, "got") < 0)
        goto done;
    Py_ssize_t n = count_of(&ids), size = count_of(&above);
    if ((given && count_of(&keys) != n) || count_of(&rows) < n || count_of(&okeys) < n || count_of(&cand) < n ||
        count_of(&bound) != size || count_of(&hits) != size || count_of(&got) != size) {
        PyErr_SetString(PyExc_ValueError, "scan: buffers of the wrong sizes");
        goto done;
    }
    const int64_t *id = ids.view.buf;
    const double *given_keys = given ? keys.view.buf : NULL;
    const uint8_t *up = above.view.buf;
    const double *b = bound.view.buf;
    int64_t *out_rows = rows.view.buf, *h = hits.view.buf, *g = got.view.buf;
    double *out_keys = okeys.view.buf;
    uint8_t *c = cand.view.buf;
    Py_ssize_t m = 0, bad = 0;
    uint64_t state[4];
    seed_state(seed, state);
    Py_BEGIN_ALLOW_THREADS
    memset(h, 0, size * sizeof(int64_t));
    memset(g, 0, size * sizeof(int64_t));
    for (Py_ssize_t r = 0; r < n; r++) {
        int64_t s = id[r];
        if (s < 0 || s >= size) { bad = 1; break; }
        double u = given ? given_keys[r] : next_key(state);
        if (u <= b[s]) { /* rare: a test of one bound per row, then of the stratum's kind */
            out_rows[m] = r; out_keys[m] = u; c[m] = up[s]; m++;
            if (up[s]) g[s]++;
            else h[s]++;
        }
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "scan: a stratum id outside the strata");
        goto done;
    }
    result = PyLong_FromSsize_t(m);
done:
    release(&ids); release(&keys); release(&above); release(&bound); release(&rows);
    release(&okeys); release(&cand); release(&hits); release(&got);
    return result;
}

typedef struct {
    double key;
    int64_t at; /* the candidate's position among the candidates */
} Entry;

/* Sort doubles in place: quicksort (median of three, Hoare partition, which splits runs of
 * equal keys evenly) down to insertion sort of short ranges. */
static void sort_keys(double *v, int64_t n) {
    while (n > 16) {
        double a = v[0], b = v[n / 2], c = v[n - 1];
        double pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        int64_t i = -1, j = n;
        for (;;) {
            do i++; while (v[i] < pivot);
            do j--; while (v[j] > pivot);
            if (i >= j) break;
            double t = v[i]; v[i] = v[j]; v[j] = t;
        }
        /* [0, j] <= pivot <= [j + 1, n): recurse into the smaller side, loop on the larger */
        if (j + 1 < n - j - 1) { sort_keys(v, j + 1); v += j + 1; n -= j + 1; }
        else { sort_keys(v + j + 1, n - j - 1); n = j + 1; }
    }
    for (int64_t i = 1; i < n; i++) {
        double x = v[i];
        int64_t j = i - 1;
        while (j >= 0 && v[j] > x) { v[j + 1] = v[j]; j--; }
        v[j + 1] = x;
    }
}

/* merge(c_ids, c_keys, got, live_keys, live_counts, grown, threshold, kept, fraction, k,
 *       out_keys, out_counts, accept) -> live keys written
 *
 * The candidates (stratum ids and keys, got[s] of stratum s) are merged into the live keys of
 * the strata above the floor (sorted by stratum, then key; live_counts[s] of stratum s). A
 * touched stratum's threshold falls to its k-th smallest key (never below ``fraction``) when
 * it has grown past k rows (grown[s]) and has k keys; kept[s] becomes its keys at most its
 * threshold, and those stay live unless the threshold reached the floor. out_keys/out_counts
 * get the new live keys; accept[i] tells whether candidate i stays. */
static PyObject *merge(PyObject *self, PyObject *args) {
    PyObject *cid_obj, *ckey_obj, *got_obj, *lkeys_obj, *lcounts_obj, *grown_obj, *thr_obj, *kept_obj;
    PyObject *okeys_obj, *ocounts_obj, *accept_obj;
    double fraction;
    long long k;
    if (!PyArg_ParseTuple(args, "OOOOOOOOdLOOO", &cid_obj, &ckey_obj, &got_obj, &lkeys_obj, &lcounts_obj,
                          &grown_obj, &thr_obj, &kept_obj, &fraction, &k, &okeys_obj, &ocounts_obj,
                          &accept_obj))
        return NULL;
    Buf cid, ckey, got, lkeys, lcounts, grown, thr, kept, okeys, ocounts, accept;
    cid.held = ckey.held = got.held = lkeys.held = lcounts.held = grown.held = thr.held = kept.held = 0;
    okeys.held = ocounts.held = accept.held = 0;
    PyObject *result = NULL;
    Entry *entries = NULL;
    double *sorted = NULL; /* one stratum's candidate keys, sorted */
    int64_t *start = NULL;
    if (get_buf(cid_obj, &cid, 0, 8, "c_ids") < 0 || get_buf(ckey_obj, &ckey, 0, 8, "c_keys") < 0 ||
        get_buf(got_obj, &got, 0, 8, "got") < 0 || get_buf(lkeys_obj, &lkeys, 0, 8, "live_keys") < 0 ||
        get_buf(lcounts_obj, &lcounts, 0, 8, "live_counts") < 0 || get_buf(grown_obj, &grown, 0, 1, "grown") < 0 ||
        get_buf(thr_obj, &thr, 1, 8, "threshold") < 0 || get_buf(kept_obj, &kept, 1, 8, "kept") < 0 ||
        get_buf(okeys_obj, &okeys, 1, 8, "out_keys") < 0 ||
        get_buf(ocounts_obj, &ocounts, 1, 8, "out_counts") < 0 || get_buf(accept_obj, &accept, 1, 1, "accept") < 0)
        goto done;
    Py_ssize_t nc = count_of(&cid), size = count_of(&got), nl = count_of(&lkeys), sl = count_of(&lcounts);
    if (count_of(&ckey) != nc || count_of(&accept) != nc || sl > size || count_of(&grown) != size ||
        count_of(&thr) != size || count_of(&kept) != size || count_of(&ocounts) != size ||
        count_of(&okeys) < nl + nc || k < 1) {
        PyErr_SetString(PyExc_ValueError, "merge: buffers of the wrong sizes");
        goto done;
    }
    const int64_t *ci = cid.view.buf, *g = got.view.buf, *lc = lcounts.view.buf;
    const double *ck = ckey.view.buf, *lk = lkeys.view.buf;
    const uint8_t *gr = grown.view.buf;
    double *t = thr.view.buf, *ok = okeys.view.buf;
    int64_t *kp = kept.view.buf, *oc = ocounts.view.buf;
    uint8_t *acc = accept.view.buf;
    int64_t total_live = 0, total_got = 0;
    for (Py_ssize_t s = 0; s < sl; s++) {
        if (lc[s] < 0) break;
        total_live += lc[s];
    }
    for (Py_ssize_t s = 0; s < size; s++) {
        if (g[s] < 0) { total_got = -1; break; }
        total_got += g[s];
    }
    if (total_live != nl || total_got != nc) {
        PyErr_SetString(PyExc_ValueError, "merge: counts that do not add up to the keys given");
        goto done;
    }
    entries = malloc((size_t)(nc ? nc : 1) * sizeof(Entry));
    sorted = malloc((size_t)(nc ? nc : 1) * sizeof(double));
    start = malloc((size_t)(2 * size + 1) * sizeof(int64_t));
    if (!entries || !sorted || !start) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t *fill = start + size + 1;
    Py_ssize_t written = 0, bad = 0;
    Py_BEGIN_ALLOW_THREADS
    /* the candidates bucketed by stratum (in row order within one) */
    start[0] = 0;
    for (Py_ssize_t s = 0; s < size; s++) {
        start[s + 1] = start[s] + g[s];
        fill[s] = start[s];
    }
    for (Py_ssize_t i = 0; i < nc; i++) {
        int64_t s = ci[i];
        if (s < 0 || s >= size || fill[s] >= start[s + 1]) {
            bad = 1;
            break;
        }
        entries[fill[s]].key = ck[i];
        entries[fill[s]].at = i;
        fill[s]++;
    }
    if (!bad) {
        int64_t live_at = 0;
        for (Py_ssize_t s = 0; s < size; s++) {
            int64_t lo = start[s], hi = start[s + 1];
            int64_t nlive = s < sl ? lc[s] : 0;
            const double *live = lk + live_at;
            live_at += nlive;
            if (hi - lo != g[s]) { bad = 1; break; }
            if (g[s] == 0) {
                memcpy(ok + written, live, (size_t)nlive * sizeof(double));
                written += nlive;
                oc[s] = nlive;
                continue;
            }
            Entry *e = entries + lo;
            int64_t ne = hi - lo;
            for (int64_t i = 0; i < ne; i++) sorted[i] = e[i].key;
            sort_keys(sorted, ne);
            /* merged keys of the stratum, written at out[written..] */
            double *m = ok + written;
            int64_t a = 0, c = 0, have = nlive + ne;
            for (int64_t i = 0; i < have; i++) {
                if (c >= ne || (a < nlive && live[a] <= sorted[c])) m[i] = live[a++];
                else m[i] = sorted[c++];
            }
            double threshold = t[s];
            if (gr[s] && have >= k) {
                double kth = m[k - 1];
                threshold = kth > fraction ? kth : fraction;
            }
            int64_t kept_here = 0;
            while (kept_here < have && m[kept_here] <= threshold) kept_here++;
            t[s] = threshold;
            kp[s] = kept_here;
            int64_t stay = threshold > fraction ? kept_here : 0;
            written += stay;
            oc[s] = stay;
            for (int64_t i = 0; i < ne; i++) acc[e[i].at] = e[i].key <= threshold; /* in any order */
        }
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "merge: a candidate's stratum outside the strata, or counts that do not match");
        goto done;
    }
    result = PyLong_FromSsize_t(written);
done:
    free(entries);
    free(sorted);
    free(start);
    release(&cid); release(&ckey); release(&got); release(&lkeys); release(&lcounts); release(&grown);
    release(&thr); release(&kept); release(&okeys); release(&ocounts); release(&accept);
    return result;
}

/* The first eight bytes of a string (zero beyond its end): its whole value when it has at most
 * eight, read as one word when the buffer holds eight bytes from its start. */
static inline uint64_t head_word(const uint8_t *buf, int64_t buflen, int64_t lo, int64_t len) {
    uint64_t w = 0;
    if (len >= 8) {
        memcpy(&w, buf + lo, 8);
        return w;
    }
    if (lo + 8 <= buflen) {
        memcpy(&w, buf + lo, 8);
        return len ? w & (~0ULL >> (64 - 8 * len)) : 0;
    }
    for (int64_t i = 0; i < len; i++) w |= (uint64_t)buf[lo + i] << (8 * i);
    return w;
}

/* The hash of a string from its first word, its length and (beyond eight bytes) the rest: its
 * high bits are the well mixed ones (a slot is taken from them). */
static inline uint64_t hash_string(uint64_t head, const uint8_t *p, int64_t len) {
    uint64_t h = head ^ ((uint64_t)len * 0x9E3779B97F4A7C15ULL);
    for (int64_t i = 8; i < len; i++) h = (h ^ p[i]) * 0x100000001B3ULL;
    h ^= h >> 33; /* MurmurHash3's finalizer */
    h *= 0xFF51AFD7ED558CCDULL;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ULL;
    return h ^ (h >> 33);
}

/* A dictionary's strings in an open-addressing table of their indices (-1: empty). */
typedef struct {
    int32_t *table;
    size_t cap; /* a power of two */
    int shift;  /* a slot: the hash's top log2(cap) bits */
    uint64_t *heads;
    int64_t *lens, *starts;
    const uint8_t *data;
} Strings;

/* The slot of the table holding a string equal to the given one (its first word ``head``, its
 * bytes ``p``), or the empty slot where it would go. */
static inline size_t slot_of(const Strings *t, uint64_t head, const uint8_t *p, int64_t len) {
    size_t at = hash_string(head, p, len) >> t->shift;
    for (;;) {
        int32_t e = t->table[at];
        if (e < 0 || (t->heads[e] == head && t->lens[e] == len &&
                      (len <= 8 || memcmp(t->data + t->starts[e], p, (size_t)len) == 0)))
            return at;
        at = (at + 1) & (t->cap - 1);
    }
}

#define LOOKUP_LOOP(T)                                                                            \
    do {                                                                                          \
        const T *offs = o;                                                                        \
        int64_t prev = offs[0];                                                                   \
        if (prev < 0 || prev > dlen) { bad = 1; break; }                                          \
        for (Py_ssize_t r = 0; r < n; r++) {                                                      \
            int64_t lo = prev, hi = offs[r + 1];                                                  \
            prev = hi;                                                                            \
            if (hi < lo || hi > dlen) { bad = 1; break; }                                         \
            if (v != NULL && !((v[(bit_offset + r) >> 3] >> ((bit_offset + r) & 7)) & 1)) {       \
                res[r] = 0;                                                                       \
                continue;                                                                         \
            }                                                                                     \
            int64_t len = hi - lo;                                                                \
            int32_t found = dict.table[slot_of(&dict, head_word(d, dlen, lo, len), d + lo, len)];   \
            res[r] = found;                                                                       \
            misses += found < 0;                                                                  \
        }                                                                                         \
    } while (0)

/* lookup(offsets, data, validity, bit_offset, dict_offsets, dict_data, out) -> misses
 *
 * out[r] = the index of string r (offsets: n + 1 entries of 4 or 8 bytes into data) among the
 * strings of the dictionary (dict_offsets, dict_data; the first of equal ones), or -1 if it
 * is not there; 0 for a null row (validity: an Arrow validity bitmap read from bit
 * bit_offset, or None). misses: the rows not null and not found. */
static PyObject *lookup(PyObject *self, PyObject *args) {
    PyObject *off_obj, *data_obj, *valid_obj, *doff_obj, *ddata_obj, *out_obj;
    Py_ssize_t bit_offset;
    if (!PyArg_ParseTuple(args, "OOOnOOO", &off_obj, &data_obj, &valid_obj, &bit_offset, &doff_obj, &ddata_obj,
                          &out_obj)) return NULL;
    Buf off, data, valid, doff, ddata, out;
    off.held = data.held = valid.held = doff.held = ddata.held = out.held = 0;
    PyObject *result = NULL;
    int32_t *table = NULL;
    uint64_t *heads = NULL;
    int64_t *lens = NULL, *starts = NULL;
    if (get_buf(off_obj, &off, 0, 0, "offsets") < 0 || get_buf(data_obj, &data, 0, 1, "data") < 0 ||
        get_buf(doff_obj, &doff, 0, 0, "dict_offsets") < 0 || get_buf(ddata_obj, &ddata, 0, 1, "dict_data") < 0 ||
        get_buf(out_obj, &out, 1, 4, "out") < 0) goto done;
    if (valid_obj != Py_None && get_buf(valid_obj, &valid, 0, 1, "validity") < 0) goto done;
    Py_ssize_t ws = off.view.itemsize;
    if ((ws != 4 && ws != 8) || doff.view.itemsize != ws) {
        PyErr_SetString(PyExc_TypeError, "lookup: offsets of 4 or 8 bytes, the same for both");
        goto done;
    }
    Py_ssize_t n = count_of(&off) - 1, nd = count_of(&doff) - 1;
    if (n < 0 || nd < 0 || nd > INT32_MAX || count_of(&out) != n || bit_offset < 0 ||
        (valid.held && (bit_offset + n + 7) / 8 > valid.view.len)) {
        PyErr_SetString(PyExc_ValueError, "lookup: buffers of inconsistent sizes");
        goto done;
    }
    size_t cap = 16;
    int shift = 60; /* a slot: the hash's top log2(cap) bits */
    while (cap < (size_t)nd * 2) {
        cap <<= 1;
        shift--;
    }
    table = malloc(cap * sizeof(int32_t));
    heads = malloc((nd + 1) * sizeof(uint64_t));
    lens = malloc((nd + 1) * sizeof(int64_t));
    starts = malloc((nd + 1) * sizeof(int64_t));
    if (table == NULL || heads == NULL || lens == NULL || starts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const void *o = off.view.buf, *od = doff.view.buf;
    const uint8_t *d = data.view.buf, *dd = ddata.view.buf, *v = valid.held ? valid.view.buf : NULL;
    Strings dict = {table, cap, shift, heads, lens, starts, dd};
    int64_t dlen = (int64_t)data.view.len, ddlen = (int64_t)ddata.view.len;
    int32_t *res = out.view.buf;
    int bad = 0;
    Py_ssize_t misses = 0;
    Py_BEGIN_ALLOW_THREADS
    memset(table, 0xff, cap * sizeof(int32_t));
    for (Py_ssize_t i = 0; i < nd; i++) {
        int64_t lo = ws == 8 ? ((const int64_t *)od)[i] : ((const int32_t *)od)[i];
        int64_t hi = ws == 8 ? ((const int64_t *)od)[i + 1] : ((const int32_t *)od)[i + 1];
        if (lo < 0 || hi < lo || hi > ddlen) { bad = 1; break; }
        int64_t len = hi - lo;
        starts[i] = lo;
        lens[i] = len;
        heads[i] = head_word(dd, ddlen, lo, len);
        size_t at = slot_of(&dict, heads[i], dd + lo, len);
        if (table[at] < 0) table[at] = (int32_t)i; /* else equal to an earlier one: the first is found */
    }
    if (!bad) {
        if (ws == 8) LOOKUP_LOOP(int64_t);
        else LOOKUP_LOOP(int32_t);
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "lookup: offsets outside their data");
        goto done;
    }
    result = PyLong_FromSsize_t(misses);
done:
    free(table);
    free(heads);
    free(lens);
    free(starts);
    release(&off);
    release(&data);
    release(&valid);
    release(&doff);
    release(&ddata);
    release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"combine", combine, METH_VARARGS, "Stratum ids of rows from their key columns' value indices."},
    {"count", count, METH_VARARGS, "Rows per stratum."},
    {"scan", scan, METH_VARARGS, "Rows kept at the floor and candidates above it."},
    {"merge", merge, METH_VARARGS, "Candidates merged into the live keys of the strata above the floor."},
    {"lookup", lookup, METH_VARARGS, "The index of each string among a dictionary's strings."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_strata", NULL, -1, methods};

PyMODINIT_FUNC PyInit__strata(void) { return PyModule_Create(&module); }
