/* Compiled passes of a scan (see colonnade/encoding/kernels.py, whose NumPy code is the
 * reference these passes reproduce exactly):
 *
 *   place      a packed dictionary's indices put at the rows its validity bitmap marks
 *   group_rows rows per dictionary code (nulls counted as code m)
 *   group_sums per code, the rows with a value and the sum of the values, added in row order
 *   partial    a segment's grouped aggregates per code of one key, compacted to the groups present
 *   unscale    decimal-scaled integers divided back to the doubles they stand for
 *
 * Every function takes contiguous buffers the caller allocated (NumPy arrays), checks their
 * sizes and the indices it follows, and runs without the GIL. */

#include "buffers.h"
#include "place.h"
#include <stdint.h>
#include <string.h>

/* Holds obj's buffer in b (see get_buf); TypeError unless its items are 1, 2, 4 or 8 bytes. */
static int get_int_buf(PyObject *obj, Buf *b, int writable, const char *name) {
    if (get_buf(obj, b, writable, 0, name) < 0) return -1;
    if (b->view.itemsize != 1 && b->view.itemsize != 2 && b->view.itemsize != 4 && b->view.itemsize != 8) {
        PyErr_Format(PyExc_TypeError, "%s: items of 1, 2, 4 or 8 bytes expected", name);
        return -1;
    }
    return 0;
}

/* The unsigned integer at position i of a buffer of 1, 2, 4 or 8-byte items. */
static inline uint64_t uint_at(const void *p, Py_ssize_t itemsize, Py_ssize_t i) {
    switch (itemsize) {
    case 1: return ((const uint8_t *)p)[i];
    case 2: return ((const uint16_t *)p)[i];
    case 4: return ((const uint32_t *)p)[i];
    default: return ((const uint64_t *)p)[i];
    }
}

static inline void put_at(void *p, Py_ssize_t itemsize, Py_ssize_t i, uint64_t value) {
    switch (itemsize) {
    case 1: ((uint8_t *)p)[i] = (uint8_t)value; break;
    case 2: ((uint16_t *)p)[i] = (uint16_t)value; break;
    case 4: ((uint32_t *)p)[i] = (uint32_t)value; break;
    default: ((uint64_t *)p)[i] = value; break;
    }
}

/* place(present, validity, out) -> (rows marked, largest index)
 *
 * out[r] = the next of present's values for every row r the validity bitmap (len(out) bits,
 * least significant first) marks, 0 for the others; stops at the end of present. rows
 * marked: the set bits (the caller checks it equals len(present)); largest: the largest value
 * placed (0 if none). */
PLACE(uint8_t, uint8_t)
PLACE(uint8_t, uint16_t)
PLACE(uint8_t, uint32_t)
PLACE(uint16_t, uint16_t)
PLACE(uint16_t, uint32_t)
PLACE(uint32_t, uint32_t)

static PyObject *place(PyObject *self, PyObject *args) {
    PyObject *pres_obj, *valid_obj, *out_obj;
    if (!PyArg_ParseTuple(args, "OOO", &pres_obj, &valid_obj, &out_obj)) return NULL;
    Buf pres, valid, out;
    pres.held = valid.held = out.held = 0;
    PyObject *result = NULL;
    if (get_int_buf(pres_obj, &pres, 0, "present") < 0 || get_int_buf(valid_obj, &valid, 0, "validity") < 0 ||
        get_int_buf(out_obj, &out, 1, "out") < 0) goto done;
    Py_ssize_t v = count_of(&pres), n = count_of(&out);
    if (valid.view.itemsize != 1 || valid.view.len < (n + 7) / 8 || pres.view.itemsize > 4 || out.view.itemsize > 4) {
        PyErr_SetString(PyExc_ValueError, "place: buffers of inconsistent sizes");
        goto done;
    }
    const uint8_t *bits = valid.view.buf;
    Py_ssize_t marked = 0;
    uint64_t largest = 0;
    Py_ssize_t pw = pres.view.itemsize, ow = out.view.itemsize;
    const void *src = pres.view.buf;
    void *dst = out.view.buf;
    Py_BEGIN_ALLOW_THREADS
    if (pw == 1 && ow == 4) marked = place_uint8_t_uint32_t(src, v, bits, n, dst);
    else if (pw == 2 && ow == 4) marked = place_uint16_t_uint32_t(src, v, bits, n, dst);
    else if (pw == 4 && ow == 4) marked = place_uint32_t_uint32_t(src, v, bits, n, dst);
    else if (pw == 1 && ow == 1) marked = place_uint8_t_uint8_t(src, v, bits, n, dst);
    else if (pw == 1 && ow == 2) marked = place_uint8_t_uint16_t(src, v, bits, n, dst);
    else if (pw == 2 && ow == 2) marked = place_uint16_t_uint16_t(src, v, bits, n, dst);
    else {  /* narrower out than present: values are placed as they are truncated; the caller
             * checks the largest value fits */
        Py_ssize_t taken = 0;
        for (Py_ssize_t r = 0; r < n; r++) {
            if (bit_at(bits, r)) {
                marked++;
                put_at(dst, ow, r, taken < v ? uint_at(src, pw, taken++) : 0);
            } else {
                put_at(dst, ow, r, 0);
            }
        }
    }
    /* the largest of the values placed: present's first min(marked, v) */
    Py_ssize_t placed = marked < v ? marked : v;
    for (Py_ssize_t i = 0; i < placed; i++) {
        uint64_t x = uint_at(src, pw, i);
        largest = x > largest ? x : largest;
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("nK", marked, (unsigned long long)largest);
done:
    release(&pres);
    release(&valid);
    release(&out);
    return result;
}

/* The slot of a row: its code if it has one (valid) in [0, m), else m; a valid code out of
 * range counted in bad (the caller raises). Without branches: a third of GDELT's names are
 * null, at random, and a branch on the bit mispredicts about as often. */
static inline int64_t masked_code(int64_t raw, int valid, int64_t m, Py_ssize_t *bad) {
    int64_t in_range = (uint64_t)raw < (uint64_t)m;
    *bad += valid & !in_range;
    int64_t keep = -(valid & in_range);
    return (raw & keep) | (m & ~keep);
}

/* cnt[code]++ for every row (codes of type T), out-of-range codes counted in bad */
#define ROWS_LOOP(T)                                                                              \
    do {                                                                                          \
        if (bits == NULL) {                                                                       \
            for (Py_ssize_t i = 0; i < n; i++) {                                                  \
                int64_t code = ((const T *)c)[i];                                                 \
                if ((uint64_t)code >= (uint64_t)m) { bad++; continue; }                           \
                cnt[code]++;                                                                      \
            }                                                                                     \
        } else {                                                                                  \
            for (Py_ssize_t i = 0; i < n; i++) {                                                  \
                cnt[masked_code(((const T *)c)[i], bit_at(bits, bit_offset + i), m, &bad)]++;     \
            }                                                                                     \
        }                                                                                         \
    } while (0)

/* The loop of group_rows (and of partial): rows per code; returns the codes out of range.
 * Called without the GIL. */
static Py_ssize_t count_codes(const void *c, Py_ssize_t w, const uint8_t *bits, Py_ssize_t bit_offset, Py_ssize_t n,
                              Py_ssize_t m, int64_t *restrict cnt) {
    Py_ssize_t bad = 0;
    switch (w) {
    case 1: ROWS_LOOP(int8_t); break;
    case 2: ROWS_LOOP(int16_t); break;
    case 4: ROWS_LOOP(int32_t); break;
    default: ROWS_LOOP(int64_t); break;
    }
    return bad;
}

/* Parses (codes, validity, bit_offset, m) and checks them: rows n = len(codes). */
static int codes_args(PyObject *codes_obj, PyObject *valid_obj, Py_ssize_t bit_offset, Py_ssize_t m, Buf *codes,
                      Buf *valid) {
    if (get_int_buf(codes_obj, codes, 0, "codes") < 0) return -1;
    if (valid_obj != Py_None && get_int_buf(valid_obj, valid, 0, "validity") < 0) return -1;
    Py_ssize_t n = count_of(codes);
    if (m < 0 || bit_offset < 0 || (valid->held && (valid->view.itemsize != 1 || (bit_offset + n + 7) / 8 > valid->view.len))) {
        PyErr_SetString(PyExc_ValueError, "codes: buffers of inconsistent sizes");
        return -1;
    }
    return 0;
}

/* group_rows(codes, validity, bit_offset, m, counts) -> codes out of range
 *
 * counts[c] += the rows of code c (0 <= c < m; codes: 1, 2, 4 or 8-byte signed integers),
 * counts[m] += the null rows (validity: an Arrow validity bitmap read from bit bit_offset,
 * or None). counts: m + 1 int64. A code outside [0, m) is counted as out of range, not
 * added. */
static PyObject *group_rows(PyObject *self, PyObject *args) {
    PyObject *codes_obj, *valid_obj, *counts_obj;
    Py_ssize_t bit_offset, m;
    if (!PyArg_ParseTuple(args, "OOnnO", &codes_obj, &valid_obj, &bit_offset, &m, &counts_obj)) return NULL;
    Buf codes, valid, counts;
    codes.held = valid.held = counts.held = 0;
    PyObject *result = NULL;
    if (codes_args(codes_obj, valid_obj, bit_offset, m, &codes, &valid) < 0 ||
        get_int_buf(counts_obj, &counts, 1, "counts") < 0) goto done;
    if (counts.view.itemsize != 8 || count_of(&counts) != m + 1) {
        PyErr_SetString(PyExc_ValueError, "group_rows: counts must be m + 1 int64");
        goto done;
    }
    Py_ssize_t bad;
    const uint8_t *bits = valid.held ? valid.view.buf : NULL;
    Py_BEGIN_ALLOW_THREADS
    bad = count_codes(codes.view.buf, codes.view.itemsize, bits, bit_offset, count_of(&codes), m, counts.view.buf);
    Py_END_ALLOW_THREADS
    result = PyLong_FromSsize_t(bad);
done:
    release(&codes);
    release(&valid);
    release(&counts);
    return result;
}

/* group_sums(codes, validity, bit_offset, m, values, value_validity, value_bit_offset,
 *            counts, sums) -> codes out of range
 *
 * For every row with a value (value_validity: an Arrow validity bitmap read from bit
 * value_bit_offset, or None), counts[c] += 1 and sums[c] += the value as a double, in row
 * order, c the row's code as for group_rows (nulls: m). values: len(codes) numbers of the
 * NumPy kind ``kind`` ('f': floating point, 'i': signed, 'u': unsigned integers). */
#define SUM_LOOP(T, V)                                                                            \
    do {                                                                                          \
        const T *codes_ = (const T *)c;                                                           \
        const V *x = (const V *)values;                                                           \
        for (Py_ssize_t i = 0; i < n; i++) {                                                      \
            if (vbits != NULL && !bit_at(vbits, vbit_offset + i)) continue;                       \
            int64_t code = masked_code(codes_[i], bits == NULL || bit_at(bits, bit_offset + i), m, &bad); \
            cnt[code]++;                                                                          \
            sum[code] += (double)x[i];                                                            \
        }                                                                                         \
    } while (0)

#define SUM_CODES(V)                                                                              \
    do {                                                                                          \
        switch (w) {                                                                              \
        case 1: SUM_LOOP(int8_t, V); break;                                                       \
        case 2: SUM_LOOP(int16_t, V); break;                                                      \
        case 4: SUM_LOOP(int32_t, V); break;                                                      \
        default: SUM_LOOP(int64_t, V); break;                                                     \
        }                                                                                         \
    } while (0)

/* The loop of group_sums (and of partial): counts and sums per code of n rows; returns the
 * codes out of range. Called without the GIL. */
static Py_ssize_t sum_codes(const void *c, Py_ssize_t w, const uint8_t *bits, Py_ssize_t bit_offset, Py_ssize_t n,
                            Py_ssize_t m, const void *values, Py_ssize_t vw, int kind, const uint8_t *vbits,
                            Py_ssize_t vbit_offset, int64_t *restrict cnt, double *restrict sum) {
    Py_ssize_t bad = 0;
    if (kind == 'f') {
        if (vw == 8) SUM_CODES(double);
        else SUM_CODES(float);
    } else if (kind == 'i') {
        switch (vw) {
        case 1: SUM_CODES(int8_t); break;
        case 2: SUM_CODES(int16_t); break;
        case 4: SUM_CODES(int32_t); break;
        default: SUM_CODES(int64_t); break;
        }
    } else {
        switch (vw) {
        case 1: SUM_CODES(uint8_t); break;
        case 2: SUM_CODES(uint16_t); break;
        case 4: SUM_CODES(uint32_t); break;
        default: SUM_CODES(uint64_t); break;
        }
    }
    return bad;
}

static PyObject *group_sums(PyObject *self, PyObject *args) {
    PyObject *codes_obj, *valid_obj, *vals_obj, *vvalid_obj, *counts_obj, *sums_obj;
    Py_ssize_t bit_offset, m, vbit_offset;
    int kind;
    if (!PyArg_ParseTuple(args, "OOnnOCOnOO", &codes_obj, &valid_obj, &bit_offset, &m, &vals_obj, &kind, &vvalid_obj,
                          &vbit_offset, &counts_obj, &sums_obj)) return NULL;
    Buf codes, valid, vals, vvalid, counts, sums;
    codes.held = valid.held = vals.held = vvalid.held = counts.held = sums.held = 0;
    PyObject *result = NULL;
    if (codes_args(codes_obj, valid_obj, bit_offset, m, &codes, &valid) < 0 ||
        get_int_buf(vals_obj, &vals, 0, "values") < 0 || get_int_buf(counts_obj, &counts, 1, "counts") < 0 ||
        get_int_buf(sums_obj, &sums, 1, "sums") < 0) goto done;
    if (vvalid_obj != Py_None && get_int_buf(vvalid_obj, &vvalid, 0, "value validity") < 0) goto done;
    Py_ssize_t n = count_of(&codes), w = codes.view.itemsize, vw = vals.view.itemsize, bad = 0;
    if (counts.view.itemsize != 8 || count_of(&counts) != m + 1 || sums.view.itemsize != 8 ||
        count_of(&sums) != m + 1 || count_of(&vals) != n || vbit_offset < 0 ||
        (vvalid.held && (vvalid.view.itemsize != 1 || (vbit_offset + n + 7) / 8 > vvalid.view.len)) ||
        (kind != 'f' && kind != 'i' && kind != 'u') || (kind == 'f' && vw != 4 && vw != 8)) {
        PyErr_SetString(PyExc_ValueError, "group_sums: buffers of inconsistent sizes or kinds");
        goto done;
    }
    const uint8_t *bits = valid.held ? valid.view.buf : NULL, *vbits = vvalid.held ? vvalid.view.buf : NULL;
    Py_BEGIN_ALLOW_THREADS
    bad = sum_codes(codes.view.buf, w, bits, bit_offset, n, m, vals.view.buf, vw, kind, vbits, vbit_offset,
                    counts.view.buf, sums.view.buf);
    Py_END_ALLOW_THREADS
    result = PyLong_FromSsize_t(bad);
done:
    release(&codes);
    release(&valid);
    release(&vals);
    release(&vvalid);
    release(&counts);
    release(&sums);
    return result;
}

/* partial(codes, validity, bit_offset, m, columns) -> (groups, codes, validity, rows, figures)
 *
 * One segment's rows aggregated per code of one dictionary key (codes, validity, bit_offset,
 * m as for group_rows; nulls: a group of their own), compacted to the groups present (in code
 * order, the null group last): what colonnade.query.grouped's partial rows hold. columns: a
 * sequence of (values, kind, value_validity, value_bit_offset, sum) as for group_sums, sum
 * true when the column's sum is wanted. Returns the groups present, their codes (int32; 0 for
 * the null group), a validity bitmap for them (None without a null group), their rows (int64)
 * and per column (its rows with a value (int64), its sums (float64 for kind 'f', else the
 * float64 sums as int64; None unless wanted), a validity bitmap for the sums (None when every
 * group has a value)). ValueError if a code is out of range. */
#define PARTIAL_COLUMNS 64
static PyObject *partial(PyObject *self, PyObject *args) {
    PyObject *codes_obj, *valid_obj, *columns_obj;
    Py_ssize_t bit_offset, m;
    if (!PyArg_ParseTuple(args, "OOnnO", &codes_obj, &valid_obj, &bit_offset, &m, &columns_obj)) return NULL;
    PyObject *columns = PySequence_Fast(columns_obj, "partial: columns must be a sequence");
    if (columns == NULL) return NULL;
    Py_ssize_t ncols = PySequence_Fast_GET_SIZE(columns);
    Buf codes, valid, vals[PARTIAL_COLUMNS], vvalid[PARTIAL_COLUMNS];
    int kinds[PARTIAL_COLUMNS], wanted[PARTIAL_COLUMNS];
    Py_ssize_t voffsets[PARTIAL_COLUMNS];
    codes.held = valid.held = 0;
    for (Py_ssize_t j = 0; j < PARTIAL_COLUMNS; j++) vals[j].held = vvalid[j].held = 0;
    int64_t *tally = NULL; /* rows per code, then per column counts per code */
    double *sums = NULL;   /* per column sums per code */
    PyObject *result = NULL, *out = NULL;
    if (ncols > PARTIAL_COLUMNS) {
        PyErr_SetString(PyExc_ValueError, "partial: too many columns");
        goto done;
    }
    if (codes_args(codes_obj, valid_obj, bit_offset, m, &codes, &valid) < 0) goto done;
    Py_ssize_t n = count_of(&codes);
    for (Py_ssize_t j = 0; j < ncols; j++) {
        PyObject *vals_obj, *vvalid_obj;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(columns, j), "OCOnp", &vals_obj, &kinds[j], &vvalid_obj,
                              &voffsets[j], &wanted[j]) ||
            get_int_buf(vals_obj, &vals[j], 0, "values") < 0 ||
            (vvalid_obj != Py_None && get_int_buf(vvalid_obj, &vvalid[j], 0, "value validity") < 0))
            goto done;
        Py_ssize_t vw = vals[j].view.itemsize;
        if (count_of(&vals[j]) != n || voffsets[j] < 0 ||
            (vvalid[j].held && (vvalid[j].view.itemsize != 1 || (voffsets[j] + n + 7) / 8 > vvalid[j].view.len)) ||
            (kinds[j] != 'f' && kinds[j] != 'i' && kinds[j] != 'u') || (kinds[j] == 'f' && vw != 4 && vw != 8)) {
            PyErr_SetString(PyExc_ValueError, "partial: buffers of inconsistent sizes or kinds");
            goto done;
        }
    }
    Py_ssize_t slots = m + 1, bad = 0, groups = 0;
    tally = calloc((size_t)slots * (size_t)(ncols + 1), sizeof(int64_t));
    sums = calloc((size_t)slots * (size_t)(ncols ? ncols : 1), sizeof(double));
    if (tally == NULL || sums == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    const uint8_t *bits = valid.held ? valid.view.buf : NULL;
    Py_BEGIN_ALLOW_THREADS
    /* per column with a sum wanted or nulls: its counts and sums; the rows per code are a
     * counted column's without nulls, else counted */
    Py_ssize_t rows_from = -1;
    for (Py_ssize_t j = 0; j < ncols && !bad; j++) {
        if (!wanted[j] && !vvalid[j].held) continue; /* its counts are the rows */
        bad = sum_codes(codes.view.buf, codes.view.itemsize, bits, bit_offset, n, m, vals[j].view.buf,
                        vals[j].view.itemsize, kinds[j], vvalid[j].held ? vvalid[j].view.buf : NULL, voffsets[j],
                        tally + (j + 1) * slots, sums + j * slots);
        if (!vvalid[j].held && rows_from < 0) rows_from = j;
    }
    if (!bad) {
        if (rows_from >= 0) memcpy(tally, tally + (rows_from + 1) * slots, sizeof(int64_t) * (size_t)slots);
        else bad = count_codes(codes.view.buf, codes.view.itemsize, bits, bit_offset, n, m, tally);
    }
    for (Py_ssize_t j = 0; j < ncols && !bad; j++)
        if (!wanted[j] && !vvalid[j].held) memcpy(tally + (j + 1) * slots, tally, sizeof(int64_t) * (size_t)slots);
    for (Py_ssize_t c = 0; c < slots; c++) groups += tally[c] != 0;
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_Format(PyExc_ValueError, "%zd dictionary codes out of range", bad);
        goto done;
    }
    /* the groups present, compacted */
    int has_null = tally[m] != 0;
    PyObject *group_codes = PyBytes_FromStringAndSize(NULL, groups * 4);
    PyObject *group_valid = has_null ? PyBytes_FromStringAndSize(NULL, (groups + 7) / 8) : Py_NewRef(Py_None);
    PyObject *rows = PyBytes_FromStringAndSize(NULL, groups * 8);
    PyObject *figures = PyList_New(ncols);
    out = Py_BuildValue("(nNNNN)", groups, group_codes, group_valid, rows, figures);
    if (out == NULL || group_codes == NULL || group_valid == NULL || rows == NULL || figures == NULL) goto done;
    int32_t *gc = (int32_t *)PyBytes_AS_STRING(group_codes);
    int64_t *gr = (int64_t *)PyBytes_AS_STRING(rows);
    Py_ssize_t g = 0;
    for (Py_ssize_t c = 0; c < slots; c++) {
        if (!tally[c]) continue;
        gc[g] = c < m ? (int32_t)c : 0;
        gr[g++] = tally[c];
    }
    if (has_null) { /* every group valid but the last (the null group) */
        uint8_t *gv = (uint8_t *)PyBytes_AS_STRING(group_valid);
        memset(gv, 0xff, (size_t)(groups + 7) / 8);
        gv[(groups - 1) >> 3] &= (uint8_t)~(1u << ((groups - 1) & 7));
    }
    for (Py_ssize_t j = 0; j < ncols; j++) {
        const int64_t *cnt = tally + (j + 1) * slots;
        const double *sum = sums + j * slots;
        PyObject *counts_obj = PyBytes_FromStringAndSize(NULL, groups * 8);
        PyObject *sums_obj = wanted[j] ? PyBytes_FromStringAndSize(NULL, groups * 8) : Py_NewRef(Py_None);
        Py_ssize_t empty = 0;
        for (Py_ssize_t c = 0; c < slots; c++) empty += tally[c] && !cnt[c];
        PyObject *sums_valid = wanted[j] && empty ? PyBytes_FromStringAndSize(NULL, (groups + 7) / 8) : Py_NewRef(Py_None);
        PyObject *figure = Py_BuildValue("(NNN)", counts_obj, sums_obj, sums_valid);
        if (figure == NULL || counts_obj == NULL || sums_obj == NULL || sums_valid == NULL) {
            Py_XDECREF(figure);
            goto done;
        }
        PyList_SET_ITEM(figures, j, figure);
        int64_t *fc = (int64_t *)PyBytes_AS_STRING(counts_obj);
        uint8_t *fv = sums_valid != Py_None ? (uint8_t *)PyBytes_AS_STRING(sums_valid) : NULL;
        if (fv) memset(fv, 0, (size_t)(groups + 7) / 8);
        g = 0;
        for (Py_ssize_t c = 0; c < slots; c++) {
            if (!tally[c]) continue;
            fc[g] = cnt[c];
            if (wanted[j]) {
                if (kinds[j] == 'f') ((double *)PyBytes_AS_STRING(sums_obj))[g] = sum[c];
                else ((int64_t *)PyBytes_AS_STRING(sums_obj))[g] = (int64_t)sum[c];
            }
            if (fv && cnt[c]) fv[g >> 3] |= (uint8_t)(1u << (g & 7));
            g++;
        }
    }
    result = out;
    out = NULL;
done:
    Py_XDECREF(out);
    free(tally);
    free(sums);
    release(&codes);
    release(&valid);
    for (Py_ssize_t j = 0; j < PARTIAL_COLUMNS; j++) {
        release(&vals[j]);
        release(&vvalid[j]);
    }
    Py_DECREF(columns);
    return result;
}

/* unscale(integers, power, out): out[i] = integers[i] / power (int32 or int64 integers, float64
 * out; one correctly rounded division each, as NumPy's true divide does it). */
static PyObject *unscale(PyObject *self, PyObject *args) {
    PyObject *ints_obj, *out_obj;
    double power;
    if (!PyArg_ParseTuple(args, "OdO", &ints_obj, &power, &out_obj)) return NULL;
    Buf ints, out;
    ints.held = out.held = 0;
    PyObject *result = NULL;
    if (get_int_buf(ints_obj, &ints, 0, "integers") < 0 || get_int_buf(out_obj, &out, 1, "out") < 0) goto done;
    Py_ssize_t n = count_of(&ints);
    if ((ints.view.itemsize != 4 && ints.view.itemsize != 8) || out.view.itemsize != 8 || count_of(&out) != n) {
        PyErr_SetString(PyExc_ValueError, "unscale: int32 or int64 integers and as many doubles expected");
        goto done;
    }
    double *restrict dst = out.view.buf;
    Py_BEGIN_ALLOW_THREADS
    if (ints.view.itemsize == 4) {
        const int32_t *src = ints.view.buf;
        for (Py_ssize_t i = 0; i < n; i++) dst[i] = (double)src[i] / power;
    } else {
        const int64_t *src = ints.view.buf;
        for (Py_ssize_t i = 0; i < n; i++) dst[i] = (double)src[i] / power;
    }
    Py_END_ALLOW_THREADS
    Py_INCREF(Py_None);
    result = Py_None;
done:
    release(&ints);
    release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"unscale", unscale, METH_VARARGS, "Decimal-scaled integers divided back to doubles."},
    {"place", place, METH_VARARGS, "A packed dictionary's indices put at the rows its validity bitmap marks."},
    {"group_rows", group_rows, METH_VARARGS, "Rows per dictionary code."},
    {"group_sums", group_sums, METH_VARARGS, "Rows with a value and their sum per dictionary code."},
    {"partial", partial, METH_VARARGS, "One segment's rows aggregated per code of one dictionary key."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__scan(void) { return PyModule_Create(&module); }
