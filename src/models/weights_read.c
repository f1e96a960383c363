/* Reading a model's tensors into one block (see weights_read.h). */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "models/weights_read.h"

#include "base/error.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static const vkg_st_tensor *find(const vkg_checkpoint *ck, const char *prefix, const char *name,
                                  const vkg_safetensors **file) {
    char full[128];
    snprintf(full, sizeof full, "%s%s", prefix, name);
    return vkg_checkpoint_find(ck, full, file);
}

static int ptr_order(const void *a, const void *b) {
    uintptr_t x = (uintptr_t)*(const void *const *)a, y = (uintptr_t)*(const void *const *)b;
    return x < y ? -1 : x > y;
}

static int ends_with(const char *s, const char *end) {
    size_t ls = strlen(s), le = strlen(end);
    return ls >= le && memcmp(s + ls - le, end, le) == 0;
}

/* Every tensor of ck is one of w's or ends as note->not_read lists: a tensor the model would
 * leave unread is a weight of another model or configuration, which would answer wrongly.  The
 * matched tensors are sorted once (a checkpoint holds thousands at most), each tensor looked up. */
static vkg_status check_all_read(const vkg_checkpoint *ck, const vkg_weight_want *w, int n,
                                 const vkg_weights_note *note, vkg_error *err) {
    const vkg_st_tensor **read = malloc((size_t)(n > 0 ? n : 1) * sizeof *read);
    if (!read) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < n; i++) read[i] = w[i].found;
    qsort(read, (size_t)n, sizeof *read, ptr_order);
    vkg_status st = VKG_OK;
    for (int f = 0; st == VKG_OK && f < vkg_checkpoint_shards(ck); f++) {
        const vkg_safetensors *file = vkg_checkpoint_shard(ck, f);
        for (int j = 0; st == VKG_OK && j < vkg_safetensors_count(file); j++) {
            const vkg_st_tensor *t = vkg_safetensors_tensor(file, j);
            if (bsearch(&t, read, (size_t)n, sizeof *read, ptr_order)) continue;
            int listed = 0;
            for (const char *const *e = note->not_read; e && *e && !listed; e++) listed = ends_with(t->name, *e);
            if (!listed)
                st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: tensor %s is not a weight of the model config.json "
                                   "describes (%s): the file is of another architecture or configuration",
                                   vkg_safetensors_path(file), t->name, note->missing);
        }
    }
    free(read);
    return st;
}

vkg_status vkg_weights_match(const vkg_checkpoint *ck, const char *prefix, vkg_weight_want *w, int n,
                             const vkg_weights_note *note, vkg_error *err) {
    for (int i = 0; i < n; i++) {
        char want_s[64], got_s[128];
        const vkg_safetensors *file = NULL;
        const vkg_st_tensor *t = find(ck, prefix, w[i].name, &file);
        if (!t) t = find(ck, "", w[i].name, &file);
        const char *path = t ? vkg_safetensors_path(file) : vkg_checkpoint_path(ck);
        if (!t) {
            /* The config's sizes help when the file is of another model than config.json. */
            return vkg_error_set(err, VKG_ERR_FORMAT, "%s: tensor %s%s is missing (expected shape %s; config.json "
                                 "says %s)", path, prefix, w[i].name,
                                 vkg_shape_str(w[i].ndim, w[i].shape, want_s, sizeof want_s), note->missing);
        }
        int same = t->ndim == w[i].ndim;
        for (int d = 0; same && d < t->ndim; d++) same = t->shape[d] == w[i].shape[d];
        if (!same)
            return vkg_error_set(err, VKG_ERR_FORMAT, "%s: tensor %s has shape %s, expected %s (from config.json: "
                                 "%s)", path, t->name, vkg_shape_str(t->ndim, t->shape, got_s, sizeof got_s),
                                 vkg_shape_str(w[i].ndim, w[i].shape, want_s, sizeof want_s), note->shapes);
        if (!vkg_st_dtype_convertible(t->dtype))
            return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "%s: tensor %s is %s; only F32, F16 and BF16 weights are "
                                 "supported", path, t->name, vkg_st_dtype_name(t->dtype));
        w[i].found = t;
        w[i].file = file;
    }
    return check_all_read(ck, w, n, note, err);
}

static vkg_st_dtype file_dtype_of(vkg_dtype d) {
    return d == VKG_F16 ? VKG_ST_F16 : d == VKG_BF16 ? VKG_ST_BF16 : VKG_ST_F32;
}
vkg_dtype vkg_weights_dtype_of_file(vkg_st_dtype d) {
    return d == VKG_ST_F16 ? VKG_F16 : d == VKG_ST_BF16 ? VKG_BF16 : VKG_F32;
}

/* Whether any of elements [b, e) of dtype d has its exponent all ones (NaN or +-Inf): a loop
 * without an exit, which the compiler vectorizes (the exact search below, an element at a time,
 * took a fifth of loading a model whose file was already cached). */
static int any_nonfinite(const void *data, vkg_dtype d, size_t b, size_t e) {
    unsigned any = 0;
    if (d == VKG_F32) {
        for (size_t i = b; i < e; i++) {
            uint32_t x;
            memcpy(&x, (const float *)data + i, 4);
            any |= (x & 0x7F800000u) == 0x7F800000u;
        }
    } else {
        const uint16_t *x = data;
        const uint16_t exp = d == VKG_F16 ? 0x7C00u : 0x7F80u;
        for (size_t i = b; i < e; i++) any |= (x[i] & exp) == exp;
    }
    return any != 0;
}

/* The first element that is NaN or +-Inf in n elements of dtype d, or n: blocks are skimmed with
 * any_nonfinite, the first that holds one searched element by element. */
static size_t first_nonfinite(const void *data, vkg_dtype d, size_t n, const char **what) {
    enum { BLOCK = 256 };
    for (size_t b = 0; b < n; b += BLOCK) {
        const size_t e = n - b < BLOCK ? n : b + BLOCK;
        if (!any_nonfinite(data, d, b, e)) continue;
        for (size_t i = b; i < e; i++) {
            uint32_t bits;
            if (d == VKG_F32) memcpy(&bits, (const float *)data + i, 4);
            else bits = d == VKG_F16 ? vkg_bits_from_f32(vkg_f16_to_f32(((const uint16_t *)data)[i]))
                                     : (uint32_t)((const uint16_t *)data)[i] << 16;
            if ((bits & 0x7F800000u) != 0x7F800000u) continue;
            *what = (bits & 0x7FFFFFu) ? "NaN" : (bits >> 31) ? "-Inf" : "Inf";
            return i;
        }
    }
    return n;
}

/* A weight holding NaN or Inf would turn every answer into NaN (printed as token 0), so it is
 * refused at load, naming the first bad element.  One pass over the tensor as held (f32 or
 * 16-bit), small beside the read itself (vectorized: first_nonfinite). */
static vkg_status check_finite(const char *path, const vkg_st_tensor *t, const void *v, vkg_dtype d, vkg_error *err) {
    const size_t n = (size_t)vkg_st_tensor_numel(t);
    const char *what = "";
    size_t i = first_nonfinite(v, d, n, &what);
    if (i == n) return VKG_OK;
    char where[64] = "", converted[96] = "";
    if (t->ndim == 2)
        snprintf(where, sizeof where, " (row %zu, column %zu)", i / (size_t)t->shape[1], i % (size_t)t->shape[1]);
    if (file_dtype_of(d) != t->dtype)
        snprintf(converted, sizeof converted, " once converted from %s to %s%s", vkg_st_dtype_name(t->dtype),
                 vkg_dtype_name(d), d == VKG_F16 ? " (f16 ends at 65504)" : "");
    return vkg_error_set(err, VKG_ERR_FORMAT, "%s: tensor %s holds %s at index %zu%s%s", path, t->name, what, i,
                         where, converted);
}

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* dst [cols, rows] = src [rows, cols] transposed, elements of type T, in tiles of 32 x 32 so
 * that both sides are read and written a cache line at a time. */
#define TRANSPOSE(T)                                                                                      \
    static void transpose_##T(const T *src, T *dst, size_t rows, size_t cols) {                          \
        enum { TILE = 32 };                                                                               \
        for (size_t r0 = 0; r0 < rows; r0 += TILE)                                                        \
            for (size_t c0 = 0; c0 < cols; c0 += TILE) {                                                  \
                const size_t r1 = r0 + TILE < rows ? r0 + TILE : rows, c1 = c0 + TILE < cols ? c0 + TILE : cols; \
                for (size_t c = c0; c < c1; c++)                                                          \
                    for (size_t r = r0; r < r1; r++) dst[c * rows + r] = src[r * cols + c];               \
            }                                                                                             \
    }
TRANSPOSE(uint16_t)
TRANSPOSE(uint32_t)
#undef TRANSPOSE

/* Tells progress how far the read is; VKG_ERR_CANCELLED when it says stop. */
static vkg_status report(const vkg_weights_progress *progress, size_t done, size_t total, const char *path,
                         vkg_error *err) {
    if (!progress || !progress->fn) return VKG_OK;
    const float fraction = total ? (float)((double)done / (double)total) : 1.0f;
    return progress->fn(progress->user, fraction) ? VKG_OK
                                                  : vkg_error_set(err, VKG_ERR_CANCELLED, "%s: loading cancelled by "
                                                                  "the progress callback", path);
}

vkg_status vkg_weights_read(const vkg_checkpoint *ck, vkg_weight_want *w, int n, vkg_dtype matrix_dtype,
                            const vkg_weights_progress *progress, void **block_out, size_t *bytes, vkg_error *err) {
    const char *path = vkg_checkpoint_path(ck);
    enum { TENSOR_ALIGN = 256 };
    *block_out = NULL;
    *bytes = 0;
    const size_t page = (size_t)sysconf(_SC_PAGESIZE) > TENSOR_ALIGN ? (size_t)sysconf(_SC_PAGESIZE) : TENSOR_ALIGN;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        const vkg_dtype d = w[i].ndim == 2 ? matrix_dtype : VKG_F32;
        total += (size_t)vkg_st_tensor_numel(w[i].found) * vkg_dtype_size(d);
        if (!w[i].joined) total = round_up(total, TENSOR_ALIGN);
    }
    total = round_up(total ? total : 1, page);
    if ((uint64_t)total > vkg_host_memory_bytes())
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "%s: the weights need %.1f GiB, more than this machine's "
                             "%.1f GiB of memory", path, (double)total / 1073741824.0,
                             (double)vkg_host_memory_bytes() / 1073741824.0);
    void *block = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (block == MAP_FAILED)
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for the weights (%zu MB)", total >> 20);
#ifdef MADV_HUGEPAGE
    /* Every page of the block is written at load and read by every token, a decode step streaming
     * all of it: in huge pages where the kernel has them (a hint; a kernel without them ignores
     * it), the reads miss the TLB 512 times less often. */
    (void)madvise(block, total, MADV_HUGEPAGE);
#endif
    *block_out = block;
    *bytes = total;
    /* A matrix held transposed is read (and checked, so that messages name the file's rows and
     * columns) into one scratch buffer as large as the largest such, then transposed into place. */
    size_t scratch_bytes = 0;
    for (int i = 0; i < n; i++)
        if (w[i].transpose && w[i].ndim == 2) {
            size_t b = (size_t)vkg_st_tensor_numel(w[i].found) * vkg_dtype_size(matrix_dtype);
            if (b > scratch_bytes) scratch_bytes = b;
        }
    void *scratch = scratch_bytes ? malloc(scratch_bytes) : NULL;
    if (scratch_bytes && !scratch)
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for the weights (%zu MB)", scratch_bytes >> 20);
    size_t offset = 0;
    vkg_status st = report(progress, 0, total, path, err);
    for (int i = 0; i < n && st == VKG_OK; i++) {
        const vkg_st_tensor *t = w[i].found;
        const vkg_dtype d = w[i].ndim == 2 ? matrix_dtype : VKG_F32;
        const int transposed = w[i].transpose && w[i].ndim == 2;
        w[i].data = (unsigned char *)block + offset;
        offset += (size_t)vkg_st_tensor_numel(t) * vkg_dtype_size(d);
        if (!w[i].joined) offset = round_up(offset, TENSOR_ALIGN);
        void *read_to = transposed ? scratch : w[i].data;
        st = vkg_safetensors_read(w[i].file, t, file_dtype_of(d), read_to, err);
        if (st == VKG_OK) st = check_finite(vkg_safetensors_path(w[i].file), t, read_to, d, err);
        if (st == VKG_OK && transposed && vkg_dtype_size(d) == 2)
            transpose_uint16_t(scratch, w[i].data, (size_t)t->shape[0], (size_t)t->shape[1]);
        else if (st == VKG_OK && transposed)
            transpose_uint32_t(scratch, w[i].data, (size_t)t->shape[0], (size_t)t->shape[1]);
        if (st == VKG_OK) st = report(progress, i + 1 == n ? total : offset, total, path, err);
    }
    free(scratch);
    return st == VKG_OK ? vkg_checkpoint_check_unchanged(ck, err) : st;
}

void vkg_weights_free(void *block, size_t bytes) {
    if (block) munmap(block, bytes);
}
