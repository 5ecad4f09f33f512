/* Payloads of a chunk decoded in one call each without the GIL (see colonnade/encoding/packed.py
 * and colonnade/encoding/scaled.py for the layouts, and for the Python code this reproduces
 * exactly and that runs when this is unavailable):
 *
 *   unpack(payload, index_width, mode, value_width) -> (n, v, m, validity, rows, offsets, values)
 *       a packed dictionary
 *   unscale(payload) -> (n, v, validity, values)
 *       decimal-scaled floats
 *   crc32(data, start) -> int
 *       zlib's CRC-32 of data continuing from start, by the system's libdeflate (several times
 *       zlib's speed, with the CPU's carry-less multiply), loaded when the module is imported;
 *       CRC32 says whether it was found (else the caller uses zlib.crc32)
 *
 * The sections are checked and decompressed (ZSTD through the system's libzstd, loaded when the
 * module is imported; a payload of another codec, or no libzstd: None, and the caller decodes
 * it in Python), then put at the rows the validity bitmap marks. For a packed dictionary: the
 * index planes joined, range-checked against the dictionary and placed, the value lengths
 * summed to offsets; mode 0 a dictionary of fixed-width values (value_width bytes each), 1 of
 * values with int32 offsets, 2 with int64 offsets, 3 fixed-width values looked up per row (rows
 * then holds the values, not indices). ValueError names what is malformed. */

#include "buffers.h"
#include "place.h"
#include "zstd.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* -- libdeflate's CRC-32, loaded at import ------------------------------------------------ */
static uint32_t (*deflate_crc32)(uint32_t, const void *, size_t);

static void load_deflate(void) {
    void *lib = dlopen("libdeflate.so.0", RTLD_NOW | RTLD_LOCAL);
    if (lib != NULL) deflate_crc32 = (uint32_t(*)(uint32_t, const void *, size_t))dlsym(lib, "libdeflate_crc32");
}

/* crc32(data, start) -> the CRC-32 of data continuing from start (as zlib.crc32(data, start)) */
static PyObject *crc32(PyObject *self, PyObject *args) {
    PyObject *data_obj;
    unsigned long start;
    if (!PyArg_ParseTuple(args, "Ok", &data_obj, &start)) return NULL;
    if (deflate_crc32 == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "crc32: libdeflate was not found");
        return NULL;
    }
    Buf data;
    if (get_buf(data_obj, &data, 0, 1, "data") < 0) {
        release(&data);
        return NULL;
    }
    uint32_t crc = (uint32_t)start;
    if (data.view.len > 4096) {
        Py_BEGIN_ALLOW_THREADS
        crc = deflate_crc32(crc, data.view.buf, (size_t)data.view.len);
        Py_END_ALLOW_THREADS
    } else {
        crc = deflate_crc32(crc, data.view.buf, (size_t)data.view.len);
    }
    release(&data);
    return PyLong_FromUnsignedLong(crc);
}

/* -- the payload ------------------------------------------------------------------------- */
#define HEAD 16
#define SECTIONS 5

static inline uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

typedef struct {
    const uint8_t *stored; /* in the payload */
    uint32_t raw, size;    /* raw length; stored length */
    char *out;             /* the raw bytes when decompressed (bytes object's buffer) */
} Section;

/* The largest of n items (0 if none). */
#define LARGEST(T)                                                                                \
    static T largest_##T(const T *items, Py_ssize_t n) {                                          \
        T top = 0;                                                                                \
        for (Py_ssize_t j = 0; j < n; j++) top = items[j] > top ? items[j] : top;                 \
        return top;                                                                               \
    }

LARGEST(uint8_t)
LARGEST(uint32_t)

/* The v indices of w byte planes joined into 4-byte integers. */
static void join_planes(const uint8_t *planes, int w, Py_ssize_t v, uint32_t *out) {
    if (w == 1) {
        for (Py_ssize_t j = 0; j < v; j++) out[j] = planes[j];
    } else if (w == 2) {
        for (Py_ssize_t j = 0; j < v; j++) out[j] = planes[j] | (uint32_t)planes[v + j] << 8;
    } else {
        for (Py_ssize_t j = 0; j < v; j++)
            out[j] = planes[j] | (uint32_t)planes[v + j] << 8 | (uint32_t)planes[2 * v + j] << 16 |
                     (uint32_t)planes[3 * v + j] << 24;
    }
}

PLACE(uint8_t, uint8_t)
PLACE(uint8_t, uint16_t)
PLACE(uint8_t, uint32_t)
PLACE(uint32_t, uint16_t)
PLACE(uint32_t, uint32_t)

/* Each row's value looked up by its index (0 for a null: any index then reads values[0]). */
#define GATHER(T)                                                                                 \
    static void gather_##T(const uint32_t *index, Py_ssize_t n, const T *values, T *dst) {        \
        for (Py_ssize_t r = 0; r < n; r++) dst[r] = values[index[r]];                            \
    }

GATHER(uint8_t)
GATHER(uint16_t)
GATHER(uint32_t)
GATHER(uint64_t)

/* Rows of n, each the index (or, mode 3, the value) of the next row with a value; the bitmap
 * and the range of the indices checked first. An error message, or NULL. */
static const char *place_rows(const uint8_t *planes, int w, Py_ssize_t v, Py_ssize_t m, const uint8_t *bits,
                              Py_ssize_t n, int mode, int out_width, const void *values, void *rows) {
    uint32_t *joined = NULL;
    if (w > 1 || mode == 3) {
        /* mode 3: the indices placed at their rows (as 4 bytes), then the values gathered */
        joined = malloc(sizeof(uint32_t) * (size_t)(v + (mode == 3 ? n : 0)) + 4);
        if (joined == NULL) return "out of memory";
        join_planes(planes, w, v, joined);
    }
    if ((joined ? largest_uint32_t(joined, v) : largest_uint8_t(planes, v)) >= (uint64_t)m && v) {
        free(joined);
        return "a dictionary index is out of range";
    }
    uint32_t *placed = mode == 3 ? joined + v : NULL;
    Py_ssize_t marked;
    if (mode == 3) marked = place_uint32_t_uint32_t(joined, v, bits, n, placed);
    else if (w == 1 && out_width == 1) marked = place_uint8_t_uint8_t(planes, v, bits, n, rows);
    else if (w == 1 && out_width == 2) marked = place_uint8_t_uint16_t(planes, v, bits, n, rows);
    else if (w == 1) marked = place_uint8_t_uint32_t(planes, v, bits, n, rows);
    else if (out_width == 2) marked = place_uint32_t_uint16_t(joined, v, bits, n, rows);
    else marked = place_uint32_t_uint32_t(joined, v, bits, n, rows);
    const char *error = NULL;
    if (marked != v) {
        error = "the validity bitmap disagrees with the rows with a value";
    } else if (mode == 3 && m == 0) {
        memset(rows, 0, (size_t)n * out_width);
    } else if (mode == 3) {
        if (out_width == 1) gather_uint8_t(placed, n, values, rows);
        else if (out_width == 2) gather_uint16_t(placed, n, values, rows);
        else if (out_width == 4) gather_uint32_t(placed, n, values, rows);
        else gather_uint64_t(placed, n, values, rows);
    }
    free(joined);
    return error;
}

/* The count sections from at on (raw length, stored length, bytes each), which must end the
 * payload; *compressed set when any is. An error message, or NULL. */
static const char *parse_sections(const uint8_t *p, Py_ssize_t len, Py_ssize_t at, int count, Section *sec,
                                  int *compressed) {
    *compressed = 0;
    for (int i = 0; i < count; i++) {
        if (at + 8 > len) return "packed payload is truncated";
        sec[i].raw = le32(p + at);
        sec[i].size = le32(p + at + 4);
        at += 8;
        if (at + (Py_ssize_t)sec[i].size > len || sec[i].size > sec[i].raw) return "packed payload section is truncated or invalid";
        sec[i].stored = p + at;
        sec[i].out = NULL;
        *compressed |= sec[i].size != sec[i].raw;
        at += sec[i].size;
    }
    return at != len ? "packed payload has trailing bytes" : NULL;
}

/* Each section that has an out buffer gets its raw bytes there (decompressed, or copied); run
 * without the GIL. An error message (in detail when it names ZSTD's), or NULL. */
static const char *inflate_sections(Section *sec, int count, char *detail, size_t detail_size) {
    ZSTD_DCtx *ctx = NULL;
    const char *error = NULL;
    for (int i = 0; i < count && error == NULL; i++) {
        if (sec[i].out == NULL) continue;
        if (sec[i].size == sec[i].raw) {
            if (sec[i].raw) memcpy(sec[i].out, sec[i].stored, sec[i].raw);
            continue;
        }
        if (ctx == NULL && (ctx = take_context()) == NULL) {
            error = "out of memory for a decompression context";
            break;
        }
        size_t got = zstd_decompress(ctx, sec[i].out, sec[i].raw, sec[i].stored, sec[i].size);
        if (zstd_is_error(got)) {
            snprintf(detail, detail_size, "undecodable packed section: %s", zstd_error_name(got));
            error = detail;
        } else if (got != sec[i].raw) {
            error = "packed payload section has the wrong length";
        }
    }
    give_context(ctx);
    return error;
}

static PyObject *unpack(PyObject *self, PyObject *args) {
    PyObject *payload_obj;
    int index_width, mode, value_width;
    if (!PyArg_ParseTuple(args, "Oiii", &payload_obj, &index_width, &mode, &value_width)) return NULL;
    if ((index_width != 1 && index_width != 2 && index_width != 4) || mode < 0 || mode > 3 ||
        ((mode == 0 || mode == 3) && value_width != 1 && value_width != 2 && value_width != 4 && value_width != 8)) {
        PyErr_SetString(PyExc_ValueError, "unpack: invalid arguments");
        return NULL;
    }
    Buf payload;
    if (get_buf(payload_obj, &payload, 0, 1, "payload") < 0) {
        release(&payload);
        return NULL;
    }
    PyObject *result = NULL, *objs[SECTIONS] = {NULL}, *rows_obj = NULL, *offsets_obj = NULL;
    Section sec[SECTIONS];
    const uint8_t *p = payload.view.buf;
    Py_ssize_t len = payload.view.len;
    const char *error = NULL;
    if (len < HEAD) {
        error = "packed payload shorter than its header";
        goto done;
    }
    int codec = p[0], w = p[1], lw = p[2];
    Py_ssize_t n = le32(p + 4), v = le32(p + 8), m = le32(p + 12);
    if (codec > 2 || (w != 1 && w != 2 && w != 4) || (lw != 0 && lw != 1 && lw != 2 && lw != 4) || p[3] || v > n) {
        error = "packed payload header is invalid";
        goto done;
    }
    int compressed;
    if ((error = parse_sections(p, len, HEAD, SECTIONS, sec, &compressed)) != NULL) goto done;
    if (sec[0].size != sec[0].raw) {
        error = "packed payload section is truncated or invalid";
        goto done;
    }
    if (compressed && (codec != 2 || !zstd_loaded)) { /* LZ4, or no libzstd: decoded in Python */
        Py_INCREF(Py_None);
        result = Py_None;
        goto done;
    }
    Section *validity = &sec[1], *planes = &sec[2], *sizes = &sec[3], *values = &sec[4];
    if (validity->raw != (v < n ? (n + 7) / 8 : 0) || planes->raw != (uint64_t)v * w) {
        error = "packed payload sections disagree with its row counts";
        goto done;
    }
    int variable = mode == 1 || mode == 2;
    if (variable ? (lw == 0 || sizes->raw != (uint64_t)m * lw || (mode == 1 && values->raw >= (1u << 31)))
                 : (lw != 0 || values->raw != (uint64_t)m * value_width || sizes->raw)) {
        error = variable ? "packed payload value lengths disagree with the dictionary"
                         : "packed payload cannot hold values of its type";
        goto done;
    }
    /* buffers for the sections and the outputs, made while the GIL is held */
    for (int i = 1; i < SECTIONS; i++) {
        if (i == 1 || i == 4 || sec[i].size != sec[i].raw) {
            objs[i] = PyBytes_FromStringAndSize(NULL, sec[i].raw);
            if (objs[i] == NULL) goto done;
            sec[i].out = PyBytes_AS_STRING(objs[i]);
        }
    }
    int out_width = mode == 3 ? value_width : index_width;
    rows_obj = PyBytes_FromStringAndSize(NULL, n * out_width);
    if (rows_obj == NULL) goto done;
    if (variable) {
        offsets_obj = PyBytes_FromStringAndSize(NULL, (m + 1) * (mode == 1 ? 4 : 8));
        if (offsets_obj == NULL) goto done;
    }
    char detail[200] = "";
    uint64_t total = 0;
    Py_BEGIN_ALLOW_THREADS
    error = inflate_sections(sec, SECTIONS, detail, sizeof detail);
    if (error == NULL && mode != 3 && m && (uint64_t)(m - 1) >> (8 * index_width - 1))
        error = "the dictionary is too large for its index type";
    if (error == NULL) {
        const uint8_t *bits = v < n ? (const uint8_t *)validity->out : NULL;
        const uint8_t *planes = sec[2].out ? (const uint8_t *)sec[2].out : sec[2].stored;
        error = place_rows(planes, w, v, m, bits, n, mode, out_width, values->out, PyBytes_AS_STRING(rows_obj));
    }
    if (error == NULL && variable) {
        const uint8_t *lengths = sec[3].out ? (const uint8_t *)sec[3].out : sec[3].stored;
        char *offsets = PyBytes_AS_STRING(offsets_obj);
        for (Py_ssize_t k = 0; k <= m; k++) {
            if (mode == 1) ((int32_t *)offsets)[k] = (int32_t)total;
            else ((int64_t *)offsets)[k] = (int64_t)total;
            if (k < m) {
                total += lw == 1 ? lengths[k] : lw == 2 ? (uint32_t)lengths[2 * k] | (uint32_t)lengths[2 * k + 1] << 8
                                                        : le32(lengths + 4 * k);
            }
        }
        if (total != values->raw) error = "packed payload values disagree with their lengths";
    }
    Py_END_ALLOW_THREADS
    if (error != NULL) goto done;
    result = Py_BuildValue("nnnOOOO", n, v, m, v < n ? objs[1] : Py_None, rows_obj,
                           offsets_obj ? offsets_obj : Py_None, objs[4]);
done:
    if (error != NULL && result == NULL && !PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, error);
    for (int i = 0; i < SECTIONS; i++) Py_XDECREF(objs[i]);
    Py_XDECREF(rows_obj);
    Py_XDECREF(offsets_obj);
    release(&payload);
    return result;
}

/* -- decimal-scaled values (colonnade/encoding/scaled.py) --------------------------------- */
PLACE(uint64_t, uint64_t)

#define SCALED_SECTIONS 2

/* unscale_W_T(planes, v, power, out): out[j] = the j-th of v integers (zigzag-encoded, in W
 * byte planes) / power, as T (a double, correctly rounded; a float: that double rounded). One
 * loop per width and type, without branches, so that the compiler vectorizes it (-O3; and,
 * built by GCC for x86-64, for AVX2 too, the clone chosen at load where the CPU has it). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define VECTOR_CLONES
#endif
#define UNSCALE(W, Z, S, T)                                                                      \
    VECTOR_CLONES                                                                                 \
    static void unscale_##W##_##T(const uint8_t *planes, Py_ssize_t v, double power, T *restrict out) { \
        for (Py_ssize_t j = 0; j < v; j++) {                                                      \
            Z zz = 0;                                                                             \
            for (int k = 0; k < W; k++) zz |= (Z)planes[(Py_ssize_t)k * v + j] << (8 * k);        \
            S x = (S)(zz >> 1) ^ -(S)(zz & 1);                                                    \
            out[j] = (T)((double)x / power);                                                      \
        }                                                                                         \
    }

UNSCALE(4, uint32_t, int32_t, double)
UNSCALE(8, uint64_t, int64_t, double)
UNSCALE(4, uint32_t, int32_t, float)
UNSCALE(8, uint64_t, int64_t, float)

/* unscale(payload) -> (n, v, validity, values) or None
 *
 * A decimal-scaled payload: header (codec, integer width w 4 or 8, scale e <= 12, value type 0
 * double or 1 float, rows n, rows with a value v, 4 reserved bytes), then the validity bitmap
 * and the v integers, zigzag-encoded and split into w byte planes. values: n doubles (or
 * floats), each integer / 10**e (one correctly rounded division; for floats that double
 * rounded to float), 0 for a null. */
static PyObject *unscale(PyObject *self, PyObject *args) {
    PyObject *payload_obj;
    if (!PyArg_ParseTuple(args, "O", &payload_obj)) return NULL;
    Buf payload;
    if (get_buf(payload_obj, &payload, 0, 1, "payload") < 0) {
        release(&payload);
        return NULL;
    }
    PyObject *result = NULL, *validity_obj = NULL, *planes_obj = NULL, *values_obj = NULL;
    Section sec[SCALED_SECTIONS];
    const uint8_t *p = payload.view.buf;
    Py_ssize_t len = payload.view.len;
    const char *error = NULL;
    char detail[200] = "";
    int compressed;
    if (len < HEAD) {
        error = "scaled payload shorter than its header";
        goto done;
    }
    int codec = p[0], w = p[1], scale = p[2], type = p[3];
    Py_ssize_t n = le32(p + 4), v = le32(p + 8);
    if (codec > 2 || (w != 4 && w != 8) || scale > 12 || type > 1 || le32(p + 12) || v > n) {
        error = "scaled payload header is invalid";
        goto done;
    }
    if ((error = parse_sections(p, len, HEAD, SCALED_SECTIONS, sec, &compressed)) != NULL) goto done;
    if (compressed && (codec != 2 || !zstd_loaded)) {
        Py_INCREF(Py_None);
        result = Py_None;
        goto done;
    }
    if (sec[0].raw != (v < n ? (n + 7) / 8 : 0) || sec[1].raw != (uint64_t)v * w) {
        error = "scaled payload sections disagree with its row counts";
        goto done;
    }
    int out_width = type == 0 ? 8 : 4;
    if ((validity_obj = PyBytes_FromStringAndSize(NULL, sec[0].raw)) == NULL ||
        (values_obj = PyBytes_FromStringAndSize(NULL, n * out_width)) == NULL)
        goto done;
    sec[0].out = PyBytes_AS_STRING(validity_obj);
    if (sec[1].size != sec[1].raw) {
        if ((planes_obj = PyBytes_FromStringAndSize(NULL, sec[1].raw)) == NULL) goto done;
        sec[1].out = PyBytes_AS_STRING(planes_obj);
    }
    Py_BEGIN_ALLOW_THREADS
    error = inflate_sections(sec, SCALED_SECTIONS, detail, sizeof detail);
    void *present = error == NULL && v < n ? malloc((size_t)v * out_width + 8) : NULL;
    if (error == NULL && v < n && present == NULL) error = "out of memory";
    if (error == NULL) {
        const uint8_t *planes = sec[1].out ? (const uint8_t *)sec[1].out : sec[1].stored;
        double power = 1.0;
        for (int k = 0; k < scale; k++) power *= 10.0; /* exact: 10**12 < 2**53 */
        /* without nulls the values go straight to the column; with some, next to each other
         * first, then to their rows */
        void *values = PyBytes_AS_STRING(values_obj), *at = v == n ? values : present;
        if (type == 0 && w == 4) unscale_4_double(planes, v, power, at);
        else if (type == 0) unscale_8_double(planes, v, power, at);
        else if (w == 4) unscale_4_float(planes, v, power, at);
        else unscale_8_float(planes, v, power, at);
        const uint8_t *bits = v < n ? (const uint8_t *)sec[0].out : NULL;
        Py_ssize_t marked = v == n ? n
                            : type == 0 ? place_uint64_t_uint64_t(present, v, bits, n, (uint64_t *)values)
                                        : place_uint32_t_uint32_t(present, v, bits, n, (uint32_t *)values);
        if (marked != v) error = "the validity bitmap disagrees with the rows with a value";
    }
    free(present);
    Py_END_ALLOW_THREADS
    if (error != NULL) goto done;
    result = Py_BuildValue("nnOO", n, v, v < n ? validity_obj : Py_None, values_obj);
done:
    if (error != NULL && result == NULL && !PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, error);
    Py_XDECREF(validity_obj);
    Py_XDECREF(planes_obj);
    Py_XDECREF(values_obj);
    release(&payload);
    return result;
}

static PyMethodDef methods[] = {
    {"unpack", unpack, METH_VARARGS, "A packed dictionary payload decoded without the GIL."},
    {"unscale", unscale, METH_VARARGS, "A decimal-scaled payload decoded without the GIL."},
    {"crc32", crc32, METH_VARARGS, "zlib's CRC-32 of data continuing from start, by libdeflate."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_packed", NULL, -1, methods};

PyMODINIT_FUNC PyInit__packed(void) {
    load_zstd();
    load_deflate();
    PyObject *mod = PyModule_Create(&module);
    if (mod != NULL && (PyModule_AddIntConstant(mod, "ZSTD", zstd_loaded) < 0 ||
                        PyModule_AddIntConstant(mod, "CRC32", deflate_crc32 != NULL) < 0)) {
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
