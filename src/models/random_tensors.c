/* Drawing and writing a random checkpoint's tensors (see random_tensors.h). */
#define _DEFAULT_SOURCE /* strdup */
#include "models/random_tensors.h"

#include "base/error.h"
#include "base/half.h"
#include "cpu/threadpool.h"
#include "models/checkpoint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void vkg_random_tensors_init(vkg_random_tensors *s, vkg_st_dtype dtype, uint64_t seed) {
    memset(s, 0, sizeof *s);
    s->dtype = dtype;
    vkg_rng_seed(&s->rng, seed);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores > 1) s->pool = vkg_threadpool_new(cores < 64 ? (int)cores : 64);
}

void vkg_random_tensors_free(vkg_random_tensors *s) {
    for (int i = 0; i < s->n; i++) {
        free((void *)s->items[i].name);
        free((void *)s->items[i].data);
    }
    free(s->items);
    vkg_threadpool_free(s->pool);
}

/* Values per block of a normal fill.  Box-Muller's log and cosine cost over ten times what its
 * two draws do, so the blocks are drawn (and converted) on every core, each range of them from
 * the generator jumped ahead to its first value: the same values as one vkg_rng_fill_normal over
 * it all. */
enum { NORMAL_BLOCK = 1 << 16 };

typedef struct normal_fill {
    vkg_rng start;           /* the generator at the fill's first value */
    float *x;
    uint16_t *h;             /* NULL: f32, else x converted to 16 bits   */
    int bf16;                /* h holds bf16, else f16                   */
    size_t n;
    float mean, std;
} normal_fill;

static void fill_normal_blocks(void *ctx, size_t begin, size_t end) {
    const normal_fill *f = ctx;
    vkg_rng r = f->start;
    vkg_rng_skip_normals(&r, begin * NORMAL_BLOCK);
    for (size_t b = begin; b < end; b++) { /* block b + 1 starts where block b ends */
        const size_t lo = b * NORMAL_BLOCK, hi = f->n - lo < NORMAL_BLOCK ? f->n : lo + NORMAL_BLOCK;
        vkg_rng_fill_normal(&r, f->x + lo, hi - lo, f->std);
        for (size_t i = lo; i < hi; i++) f->x[i] += f->mean;
        if (f->h) vkg_f32_to_16bit_n(f->x + lo, f->h + lo, hi - lo, f->bf16);
    }
}

static void fill_normal(vkg_random_tensors *s, float *x, uint16_t *h, size_t n, float mean, float std) {
    const size_t blocks = (n + NORMAL_BLOCK - 1) / NORMAL_BLOCK;
    normal_fill f = {.start = s->rng, .x = x, .h = h, .bf16 = s->dtype == VKG_ST_BF16, .n = n, .mean = mean, .std = std};
    if (s->pool && blocks > 1)
        vkg_threadpool_for(s->pool, blocks, fill_normal_blocks, &f);
    else
        fill_normal_blocks(&f, 0, blocks);
    vkg_rng_skip_normals(&s->rng, n);
}

/* Adds a tensor named prefix + name: mean + N(0, std) (FILL_NORMAL), the lower triangle of ones
 * over the last two dimensions (FILL_TRIL), or `mean` everywhere (FILL_CONSTANT). */
vkg_status vkg_random_tensors_add(vkg_random_tensors *s, const char *name, int ndim, const int64_t *shape,
                                  vkg_fill_kind kind, float mean, float std, vkg_error *err) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        vkg_st_write *items = realloc(s->items, (size_t)cap * sizeof *items);
        if (!items) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory listing tensors");
        s->items = items;
        s->cap = cap;
    }
    size_t numel = 1;
    for (int d = 0; d < ndim; d++) numel *= (size_t)shape[d];
    float *x = malloc(numel * sizeof *x + 1);
    uint16_t *h = s->dtype != VKG_ST_F32 ? malloc(numel * sizeof *h + 1) : NULL;
    char *full = strdup(name);
    if (!x || (!h && s->dtype != VKG_ST_F32) || !full) {
        free(x);
        free(h);
        free(full);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for tensor %s (%zu elements)", name, numel);
    }
    if (kind == VKG_FILL_NORMAL) {
        fill_normal(s, x, h, numel, mean, std); /* converts into h itself */
    } else {
        if (kind == VKG_FILL_TRIL) {
            size_t cols = (size_t)shape[ndim - 1], rows = (size_t)shape[ndim - 2];
            for (size_t i = 0; i < numel; i++) x[i] = ((i / cols) % rows) >= (i % cols) ? 1.0f : 0.0f;
        } else {
            for (size_t i = 0; i < numel; i++) x[i] = mean;
        }
        if (h) vkg_f32_to_16bit_n(x, h, numel, s->dtype == VKG_ST_BF16);
    }
    void *data = x;
    if (h) {
        free(x);
        data = h;
    }
    vkg_st_write *w = &s->items[s->n++];
    memset(w, 0, sizeof *w);
    w->name = full;
    w->dtype = s->dtype;
    w->ndim = ndim;
    memcpy(w->shape, shape, (size_t)ndim * sizeof *shape);
    w->data = data;
    return VKG_OK;
}

vkg_status vkg_make_dirs(const char *dir, vkg_error *err) {
    char *path = strdup(dir);
    if (!path) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    vkg_status st = VKG_OK;
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST) {
            st = vkg_error_set(err, VKG_ERR_IO, "%s: cannot create directory: %s", path, strerror(errno));
            break;
        }
        *p = saved;
        if (!saved) break;
    }
    free(path);
    struct stat sb;
    if (st == VKG_OK && (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)))
        st = vkg_error_set(err, VKG_ERR_IO, "%s: exists and is not a directory", dir);
    return st;
}


/* The index as save_pretrained writes it. */
static vkg_status write_index(const vkg_random_tensors *s, const int *shard_of, int shards, const char *dir,
                              vkg_error *err) {
    char *path = vkg_path_join(dir, VKG_CHECKPOINT_INDEX);
    if (!path) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    FILE *f = fopen(path, "w");
    if (!f) {
        vkg_status st = vkg_error_set(err, VKG_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
        free(path);
        return st;
    }
    uint64_t total = 0;
    for (int i = 0; i < s->n; i++) {
        int64_t e = 1;
        for (int d = 0; d < s->items[i].ndim; d++) e *= s->items[i].shape[d];
        total += (uint64_t)e * vkg_st_dtype_size(s->items[i].dtype);
    }
    fprintf(f, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n  \"weight_map\": {\n",
            (unsigned long long)total);
    for (int i = 0; i < s->n; i++)
        fprintf(f, "    \"%s\": \"model-%05d-of-%05d.safetensors\"%s\n", s->items[i].name, shard_of[i] + 1, shards,
                i + 1 < s->n ? "," : "");
    fprintf(f, "  }\n}\n");
    int failed = ferror(f);
    if (fclose(f) != 0) failed = 1;
    vkg_status st = failed ? vkg_error_set(err, VKG_ERR_IO, "%s: write failed: %s", path, strerror(errno)) : VKG_OK;
    free(path);
    return st;
}

/* Removes dir/name if it is there, so that a folder written again holds one layout only. */
static void remove_stale(const char *dir, const char *name) {
    char *path = vkg_path_join(dir, name);
    if (path) unlink(path);
    free(path);
}

vkg_status vkg_random_tensors_write(const vkg_random_tensors *s, const char *dir, int shards, vkg_error *err) {
    remove_stale(dir, shards <= 1 ? VKG_CHECKPOINT_INDEX : "model.safetensors");
    if (shards <= 1) {
        char *path = vkg_path_join(dir, "model.safetensors");
        if (!path) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
        vkg_status st = vkg_safetensors_write(path, s->items, s->n, err);
        free(path);
        return st;
    }
    if (shards > s->n) shards = s->n;
    /* Shard k takes the tensors whose running total of bytes ends in its k-th share. */
    int *shard_of = malloc((size_t)s->n * sizeof *shard_of + 1);
    if (!shard_of) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    double total = 0, run = 0;
    for (int i = 0; i < s->n; i++) total += (double)s->items[i].shape[0] * (s->items[i].ndim > 1 ? (double)s->items[i].shape[1] : 1);
    int k = 0;
    for (int i = 0; i < s->n; i++) {
        /* never leave fewer tensors than shards still to fill */
        if (k < shards - 1 && (run >= total * (k + 1) / shards || s->n - i <= shards - 1 - k) && i > 0) k++;
        shard_of[i] = k;
        run += (double)s->items[i].shape[0] * (s->items[i].ndim > 1 ? (double)s->items[i].shape[1] : 1);
    }
    vkg_status st = VKG_OK;
    for (int j = 0, first = 0; j < shards && st == VKG_OK; j++) {
        int last = first;
        while (last < s->n && shard_of[last] == j) last++;
        char name[64];
        snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", j + 1, shards);
        char *path = vkg_path_join(dir, name);
        if (!path) st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
        else st = vkg_safetensors_write(path, s->items + first, last - first, err);
        free(path);
        first = last;
    }
    if (st == VKG_OK) st = write_index(s, shard_of, shards, dir, err);
    free(shard_of);
    return st;
}
