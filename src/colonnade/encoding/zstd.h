/* The system's libzstd, opened when a compiled module is imported (dlopen, not linked: none is
 * needed to build), with a few contexts kept for reuse, one per concurrent caller: creating a
 * compression context costs about as much as compressing a small section. Shared by the
 * chunk decoders (_packed.c) and encoders (_encode.c). */

#ifndef COLONNADE_ZSTD_H
#define COLONNADE_ZSTD_H

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>

typedef void ZSTD_DCtx;
typedef void ZSTD_CCtx;
static ZSTD_DCtx *(*zstd_create)(void);
static size_t (*zstd_free)(ZSTD_DCtx *);
static size_t (*zstd_decompress)(ZSTD_DCtx *, void *, size_t, const void *, size_t);
static ZSTD_CCtx *(*zstd_create_c)(void);
static size_t (*zstd_free_c)(ZSTD_CCtx *);
static size_t (*zstd_compress)(ZSTD_CCtx *, void *, size_t, const void *, size_t, int);
static size_t (*zstd_bound)(size_t);
static unsigned (*zstd_is_error)(size_t);
static const char *(*zstd_error_name)(size_t);
static int zstd_loaded;      /* decompression found */
static int zstd_compresses;  /* compression found too */

static void load_zstd(void) {
    void *lib = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) return;
    zstd_create = (ZSTD_DCtx * (*)(void)) dlsym(lib, "ZSTD_createDCtx");
    zstd_free = (size_t(*)(ZSTD_DCtx *))dlsym(lib, "ZSTD_freeDCtx");
    zstd_decompress = (size_t(*)(ZSTD_DCtx *, void *, size_t, const void *, size_t))dlsym(lib, "ZSTD_decompressDCtx");
    zstd_create_c = (ZSTD_CCtx * (*)(void)) dlsym(lib, "ZSTD_createCCtx");
    zstd_free_c = (size_t(*)(ZSTD_CCtx *))dlsym(lib, "ZSTD_freeCCtx");
    zstd_compress = (size_t(*)(ZSTD_CCtx *, void *, size_t, const void *, size_t, int))dlsym(lib, "ZSTD_compressCCtx");
    zstd_bound = (size_t(*)(size_t))dlsym(lib, "ZSTD_compressBound");
    zstd_is_error = (unsigned (*)(size_t))dlsym(lib, "ZSTD_isError");
    zstd_error_name = (const char *(*)(size_t))dlsym(lib, "ZSTD_getErrorName");
    zstd_loaded = zstd_create && zstd_free && zstd_decompress && zstd_is_error && zstd_error_name;
    zstd_compresses = zstd_loaded && zstd_create_c && zstd_free_c && zstd_compress && zstd_bound;
}

#define KEPT 16

/* A pool of contexts of one kind: take() one (a kept one, or a new one: NULL when out of
 * memory), give() it back (freed when KEPT are kept already). */
typedef struct {
    void *items[KEPT];
    int count;
    pthread_mutex_t lock;
} Pool;

static void *pool_take(Pool *pool, void *(*create)(void)) {
    void *ctx = NULL;
    pthread_mutex_lock(&pool->lock);
    if (pool->count) ctx = pool->items[--pool->count];
    pthread_mutex_unlock(&pool->lock);
    return ctx ? ctx : create();
}

static void pool_give(Pool *pool, void *ctx, size_t (*destroy)(void *)) {
    if (ctx == NULL) return;
    pthread_mutex_lock(&pool->lock);
    if (pool->count < KEPT) {
        pool->items[pool->count++] = ctx;
        ctx = NULL;
    }
    pthread_mutex_unlock(&pool->lock);
    if (ctx != NULL) destroy(ctx); /* more callers at once than contexts kept */
}

static Pool decompressors = {.lock = PTHREAD_MUTEX_INITIALIZER};
static Pool compressors = {.lock = PTHREAD_MUTEX_INITIALIZER};

static ZSTD_DCtx *take_context(void) { return pool_take(&decompressors, zstd_create); }
static void give_context(ZSTD_DCtx *ctx) { pool_give(&decompressors, ctx, zstd_free); }
static ZSTD_CCtx *take_compressor(void) { return pool_take(&compressors, zstd_create_c); }
static void give_compressor(ZSTD_CCtx *ctx) { pool_give(&compressors, ctx, zstd_free_c); }

#endif
