/* .safetensors: read the header, validate every entry, read tensors into the caller's memory
 * (converting between F32, F16 and BF16 on the way); and a writer. */
#include "io/safetensors.h"

#include "base/error.h"
#include "base/file_open.h"
#include "base/json.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct vkg_safetensors {
    char *path;
    int fd;                        /* kept open for vkg_safetensors_read; -1 once closed */
    uint64_t file_bytes;           /* size, modification time and inode at open, against
                                      which vkg_safetensors_check_unchanged compares   */
    struct timespec mtime;
    ino_t inode;
    int n_tensors;
    vkg_st_tensor *tensors;        /* header order                          */
    const vkg_st_tensor **by_name; /* sorted by name, for vkg_safetensors_find */
    int n_meta;
    char **meta_keys, **meta_values;
};

/* ---- dtypes ------------------------------------------------------------------------------------ */

static const struct {
    const char *name;
    size_t size;
} dtype_info[] = {
    [VKG_ST_F32] = {"F32", 4},  [VKG_ST_F16] = {"F16", 2}, [VKG_ST_BF16] = {"BF16", 2},
    [VKG_ST_F64] = {"F64", 8},  [VKG_ST_I64] = {"I64", 8}, [VKG_ST_I32] = {"I32", 4},
    [VKG_ST_I16] = {"I16", 2},  [VKG_ST_I8] = {"I8", 1},   [VKG_ST_U8] = {"U8", 1},
    [VKG_ST_BOOL] = {"BOOL", 1},
};
#define DTYPE_COUNT ((int)(sizeof dtype_info / sizeof dtype_info[0]))
#define DTYPE_LIST "F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL"

const char *vkg_st_dtype_name(vkg_st_dtype d) {
    return ((int)d >= 0 && (int)d < DTYPE_COUNT) ? dtype_info[d].name : "?";
}

size_t vkg_st_dtype_size(vkg_st_dtype d) {
    return ((int)d >= 0 && (int)d < DTYPE_COUNT) ? dtype_info[d].size : 0;
}

int vkg_st_dtype_convertible(vkg_st_dtype d) {
    return d == VKG_ST_F32 || d == VKG_ST_F16 || d == VKG_ST_BF16;
}

int64_t vkg_st_tensor_numel(const vkg_st_tensor *t) {
    int64_t n = 1;
    for (int i = 0; t && i < t->ndim; i++) n *= t->shape[i];
    return t ? n : 0;
}

/* ---- reading ----------------------------------------------------------------------------------- */

static uint16_t load_le16(const unsigned char *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static uint32_t load_le32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint64_t load_le64(const unsigned char *p) {
    return (uint64_t)load_le32(p) | ((uint64_t)load_le32(p + 4) << 32);
}

/* Exactly bytes from offset, or an error: a short read means the file shrank since it was opened
 * (truncated or replaced while in use). */
static vkg_status read_exact(const vkg_safetensors *st, uint64_t offset, void *dst, size_t bytes, vkg_error *err) {
    unsigned char *p = dst;
    size_t done = 0;
    while (done < bytes) {
        size_t want = bytes - done < ((size_t)1 << 30) ? bytes - done : ((size_t)1 << 30);
        ssize_t n = pread(st->fd, p + done, want, (off_t)(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0)
            return vkg_error_set(err, VKG_ERR_IO, "%s: read failed at byte %llu: %s", st->path,
                                 (unsigned long long)(offset + done), strerror(errno));
        if (n == 0)
            return vkg_error_set(err, VKG_ERR_IO, "%s: the file ends at byte %llu, but %llu bytes were expected there "
                                 "(it was %llu bytes when opened: was it truncated or replaced while in use?)",
                                 st->path, (unsigned long long)(offset + done), (unsigned long long)(offset + bytes),
                                 (unsigned long long)st->file_bytes);
        done += (size_t)n;
    }
    return VKG_OK;
}

static int readable_dtype(vkg_st_dtype d) { return d == VKG_ST_F32 || d == VKG_ST_F16 || d == VKG_ST_BF16; }

/* n elements of `from` (little endian, as the file has them) as `to`, into dst. */
static void convert(vkg_st_dtype from, const unsigned char *src, size_t n, vkg_st_dtype to, void *dst) {
    for (size_t i = 0; i < n; i++) {
        float v = from == VKG_ST_F32   ? vkg_f32_from_bits(load_le32(src + 4 * i))
                  : from == VKG_ST_F16 ? vkg_f16_to_f32(load_le16(src + 2 * i))
                                       : vkg_bf16_to_f32(load_le16(src + 2 * i));
        if (to == VKG_ST_F32) ((float *)dst)[i] = v;
        else ((uint16_t *)dst)[i] = to == VKG_ST_F16 ? vkg_f32_to_f16(v) : vkg_f32_to_bf16(v);
    }
}

vkg_status vkg_safetensors_read(const vkg_safetensors *st, const vkg_st_tensor *t, vkg_st_dtype as, void *dst,
                                vkg_error *err) {
    if (!st || !t || (!dst && t->bytes))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_safetensors_read: NULL file, tensor or destination");
    if (st->fd < 0) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%s: the file is closed", st->path);
    if (as == t->dtype) return read_exact(st, t->offset, dst, (size_t)t->bytes, err);
    if (!readable_dtype(t->dtype) || !readable_dtype(as))
        return vkg_error_set(err, VKG_ERR_UNSUPPORTED,
                             "tensor \"%s\" has dtype %s; only F32, F16 and BF16 tensors convert (to %s asked)",
                             t->name ? t->name : "?", vkg_st_dtype_name(t->dtype), vkg_st_dtype_name(as));
    /* Through a bounded buffer, so a conversion never holds the tensor twice. */
    enum { CHUNK = 1 << 16 };
    const size_t in_size = vkg_st_dtype_size(t->dtype), out_size = vkg_st_dtype_size(as);
    unsigned char *buf = malloc(CHUNK * in_size);
    if (!buf) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory reading %s", st->path);
    const size_t n = (size_t)vkg_st_tensor_numel(t);
    vkg_status status = VKG_OK;
    for (size_t i = 0; i < n && status == VKG_OK; i += CHUNK) {
        size_t k = n - i < CHUNK ? n - i : CHUNK;
        status = read_exact(st, t->offset + i * in_size, buf, k * in_size, err);
        if (status == VKG_OK) convert(t->dtype, buf, k, as, (unsigned char *)dst + i * out_size);
    }
    free(buf);
    return status;
}

vkg_status vkg_safetensors_check_unchanged(const vkg_safetensors *st, vkg_error *err) {
    struct stat sb;
    if (st->fd < 0 || fstat(st->fd, &sb) != 0)
        return vkg_error_set(err, VKG_ERR_IO, "%s: cannot check the file: %s", st->path, strerror(errno));
    if ((uint64_t)sb.st_size != st->file_bytes || sb.st_ino != st->inode || sb.st_mtim.tv_sec != st->mtime.tv_sec ||
        sb.st_mtim.tv_nsec != st->mtime.tv_nsec)
        return vkg_error_set(err, VKG_ERR_IO, "%s changed while it was being read (%llu bytes when opened, %llu now%s): "
                             "the weights read may mix two versions; load it again once it is complete", st->path,
                             (unsigned long long)st->file_bytes, (unsigned long long)sb.st_size,
                             (uint64_t)sb.st_size == st->file_bytes ? ", modified" : "");
    return VKG_OK;
}

/* ---- header validation ------------------------------------------------------------------------- */

/* A JSON number that is a whole number in [0, 2^53] (exact in a double), else -1. */
static int64_t json_count(const vkg_json *v) {
    if (vkg_json_type_of(v) != VKG_JSON_NUMBER) return -1;
    double d = vkg_json_number(v);
    if (!(d >= 0 && d <= 9007199254740992.0) || d != floor(d)) return -1;
    return (int64_t)d;
}

static vkg_status parse_entry(const char *path, const char *name, const vkg_json *e, uint64_t data_start,
                              uint64_t data_bytes, vkg_st_tensor *t, vkg_error *err) {
    if (vkg_json_type_of(e) != VKG_JSON_OBJECT)
        return vkg_error_set(err, VKG_ERR_FORMAT,
                             "%s: tensor \"%s\": entry is a JSON %s, expected an object with dtype, shape and "
                             "data_offsets", path, name, vkg_json_type_name(vkg_json_type_of(e)));
    const vkg_json *dtype = vkg_json_get(e, "dtype"), *shape = vkg_json_get(e, "shape"),
                   *offsets = vkg_json_get(e, "data_offsets");
    const char *missing = !dtype ? "dtype" : !shape ? "shape" : !offsets ? "data_offsets" : NULL;
    if (missing) return vkg_error_set(err, VKG_ERR_FORMAT, "%s: tensor \"%s\": missing \"%s\"", path, name, missing);

    const char *dname = vkg_json_string(dtype, NULL);
    if (!dname)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: tensor \"%s\": \"dtype\" is a JSON %s, expected a string",
                             path, name, vkg_json_type_name(vkg_json_type_of(dtype)));
    int d = 0;
    while (d < DTYPE_COUNT && strcmp(dname, dtype_info[d].name) != 0) d++;
    if (d == DTYPE_COUNT)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: tensor \"%s\": unknown dtype \"%.40s\" (known: " DTYPE_LIST ")",
                             path, name, dname);
    t->dtype = (vkg_st_dtype)d;

    size_t ndim = vkg_json_length(shape);
    if (vkg_json_type_of(shape) != VKG_JSON_ARRAY)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: tensor \"%s\": \"shape\" is a JSON %s, expected an array",
                             path, name, vkg_json_type_name(vkg_json_type_of(shape)));
    if (ndim > VKG_ST_MAX_DIMS)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: tensor \"%s\": shape has %zu dimensions; at most %d are supported",
                             path, name, ndim, VKG_ST_MAX_DIMS);
    t->ndim = (int)ndim;
    uint64_t numel = 1, limit = UINT64_MAX / dtype_info[d].size;
    int overflow = 0;
    for (size_t i = 0; i < ndim; i++) {
        int64_t dim = json_count(vkg_json_at(shape, i));
        if (dim < 0)
            return vkg_error_set(err, VKG_ERR_FORMAT,
                                 "%s: tensor \"%s\": shape[%zu] is %g; dimensions must be non-negative integers",
                                 path, name, i, vkg_json_number(vkg_json_at(shape, i)));
        t->shape[i] = dim;
        if (dim && numel > limit / (uint64_t)dim) overflow = 1;
        else numel *= (uint64_t)dim;
    }
    char sbuf[200];
    vkg_shape_str(t->ndim, t->shape, sbuf, sizeof sbuf);

    int64_t begin = json_count(vkg_json_at(offsets, 0)), end = json_count(vkg_json_at(offsets, 1));
    if (vkg_json_type_of(offsets) != VKG_JSON_ARRAY || vkg_json_length(offsets) != 2 || begin < 0 || end < 0)
        return vkg_error_set(err, VKG_ERR_FORMAT,
                             "%s: tensor \"%s\": \"data_offsets\" must be an array of two non-negative integers "
                             "[begin, end]", path, name);
    if (begin > end)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: tensor \"%s\": data_offsets [%lld, %lld] has begin > end",
                             path, name, (long long)begin, (long long)end);
    if ((uint64_t)end > data_bytes)
        return vkg_error_set(err, VKG_ERR_FORMAT,
                             "%s: tensor \"%s\": data_offsets [%lld, %lld] run past the end of the data section "
                             "(%llu bytes; is the file truncated?)", path, name, (long long)begin, (long long)end,
                             (unsigned long long)data_bytes);
    uint64_t span = (uint64_t)(end - begin);
    if (overflow)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: tensor \"%s\": shape %s of %s is too large (its byte size "
                             "overflows 64 bits)", path, name, sbuf, dtype_info[d].name);
    if (numel * dtype_info[d].size != span)
        return vkg_error_set(err, VKG_ERR_FORMAT,
                             "%s: tensor \"%s\": shape %s of %s needs %llu bytes, but data_offsets [%lld, %lld] "
                             "span %llu bytes", path, name, sbuf, dtype_info[d].name,
                             (unsigned long long)(numel * dtype_info[d].size), (long long)begin, (long long)end,
                             (unsigned long long)span);
    t->bytes = span;
    t->offset = data_start + (uint64_t)begin;
    return VKG_OK;
}

static vkg_status parse_metadata(vkg_safetensors *st, const vkg_json *m, vkg_error *err) {
    if (vkg_json_type_of(m) != VKG_JSON_OBJECT)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: \"__metadata__\" is a JSON %s, expected an object of strings",
                             st->path, vkg_json_type_name(vkg_json_type_of(m)));
    size_t n = vkg_json_length(m);
    st->meta_keys = calloc(n + 1, sizeof(char *));
    st->meta_values = calloc(n + 1, sizeof(char *));
    if (!st->meta_keys || !st->meta_values)
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "%s: out of memory reading metadata", st->path);
    for (size_t i = 0; i < n; i++) {
        const char *key = vkg_json_key_at(m, i, NULL), *value = vkg_json_string(vkg_json_at(m, i), NULL);
        if (!value)
            return vkg_error_set(err, VKG_ERR_FORMAT, "%s: \"__metadata__\" key \"%s\" holds a JSON %s; values must be strings",
                                 st->path, key, vkg_json_type_name(vkg_json_type_of(vkg_json_at(m, i))));
        st->meta_keys[i] = strdup(key);
        st->meta_values[i] = strdup(value);
        st->n_meta = (int)i + 1;
        if (!st->meta_keys[i] || !st->meta_values[i])
            return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "%s: out of memory reading metadata", st->path);
    }
    return VKG_OK;
}

static int compare_by_name(const void *a, const void *b) {
    return strcmp((*(const vkg_st_tensor *const *)a)->name, (*(const vkg_st_tensor *const *)b)->name);
}

static int compare_by_offset(const void *a, const void *b) {
    const vkg_st_tensor *x = *(const vkg_st_tensor *const *)a, *y = *(const vkg_st_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset ? 1 : 0;
}

/* Walks the tensors in offset order: each non-empty one must start at or after every earlier
 * one's end.  by_name is used as scratch and re-sorted by name afterwards. */
static vkg_status check_overlaps(vkg_safetensors *st, uint64_t data, vkg_error *err) {
    const vkg_st_tensor **order = st->by_name;
    qsort(order, (size_t)st->n_tensors, sizeof *order, compare_by_offset);
    const vkg_st_tensor *reach = NULL; /* the tensor whose range ends furthest so far */
    for (int i = 0; i < st->n_tensors; i++) {
        const vkg_st_tensor *t = order[i];
        if (!t->bytes) continue;
        if (reach && t->offset < reach->offset + reach->bytes)
            return vkg_error_set(err, VKG_ERR_FORMAT,
                                 "%s: tensors \"%s\" (bytes %llu..%llu) and \"%s\" (bytes %llu..%llu) overlap",
                                 st->path, reach->name, (unsigned long long)(reach->offset - data),
                                 (unsigned long long)(reach->offset - data + reach->bytes), t->name,
                                 (unsigned long long)(t->offset - data), (unsigned long long)(t->offset - data + t->bytes));
        if (!reach || t->offset + t->bytes > reach->offset + reach->bytes) reach = t;
    }
    qsort(order, (size_t)st->n_tensors, sizeof *order, compare_by_name);
    return VKG_OK;
}

/* Everything after the file is opened: header length, JSON, entries, overlaps. */
static vkg_status parse_header(vkg_safetensors *st, vkg_error *err) {
    unsigned char len8[8];
    vkg_status status = read_exact(st, 0, len8, 8, err);
    if (status != VKG_OK) return status;
    uint64_t size = st->file_bytes, header_bytes = load_le64(len8);
    if (header_bytes > VKG_ST_MAX_HEADER_BYTES)
        return vkg_error_set(err, VKG_ERR_FORMAT,
                             "%s: header length %llu is over the %llu-byte limit (is this a safetensors file?)",
                             st->path, (unsigned long long)header_bytes, VKG_ST_MAX_HEADER_BYTES);
    if (header_bytes > size - 8)
        return vkg_error_set(err, VKG_ERR_FORMAT,
                             "%s: header length %llu runs past the end of the file (%llu bytes follow the length)",
                             st->path, (unsigned long long)header_bytes, (unsigned long long)(size - 8));
    char *text = malloc(header_bytes ? header_bytes : 1);
    if (!text) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "%s: out of memory for a %llu-byte header", st->path,
                                    (unsigned long long)header_bytes);
    status = read_exact(st, 8, text, header_bytes, err);
    vkg_json *root = NULL;
    vkg_error jerr;
    if (status == VKG_OK && vkg_json_parse(text, header_bytes, &root, &jerr) != VKG_OK)
        status = vkg_error_set(err, jerr.status, "%s: header (%llu bytes at offset 8) is not valid JSON: %s", st->path,
                               (unsigned long long)header_bytes, jerr.message);
    free(text);
    if (status != VKG_OK) return status;
    const uint64_t data = 8 + header_bytes;
    uint64_t data_bytes = size - 8 - header_bytes;
    size_t n = vkg_json_length(root);
    if (vkg_json_type_of(root) != VKG_JSON_OBJECT) {
        status = vkg_error_set(err, VKG_ERR_FORMAT, "%s: header is a JSON %s, expected an object of tensors",
                               st->path, vkg_json_type_name(vkg_json_type_of(root)));
        goto done;
    }
    st->tensors = calloc(n + 1, sizeof *st->tensors);
    st->by_name = calloc(n + 1, sizeof *st->by_name);
    if (!st->tensors || !st->by_name) {
        status = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "%s: out of memory for %zu tensors", st->path, n);
        goto done;
    }
    for (size_t i = 0; i < n && status == VKG_OK; i++) {
        size_t klen;
        const char *key = vkg_json_key_at(root, i, &klen);
        if (strlen(key) != klen) {
            status = vkg_error_set(err, VKG_ERR_FORMAT, "%s: tensor name \"%s...\" contains a NUL byte", st->path, key);
            break;
        }
        if (strcmp(key, "__metadata__") == 0) {
            status = parse_metadata(st, vkg_json_at(root, i), err);
            continue;
        }
        vkg_st_tensor *t = &st->tensors[st->n_tensors];
        status = parse_entry(st->path, key, vkg_json_at(root, i), data, data_bytes, t, err);
        if (status != VKG_OK) break;
        if (!(t->name = strdup(key))) status = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "%s: out of memory", st->path);
        else st->by_name[st->n_tensors++] = t;
    }
    if (status == VKG_OK) status = check_overlaps(st, data, err);
done:
    vkg_json_free(root);
    return status;
}

vkg_status vkg_safetensors_open(const char *path, vkg_safetensors **out, vkg_error *err) {
    if (out) *out = NULL;
    if (!path || !out) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_safetensors_open: NULL argument");
    struct stat sb;
    const char *what;
    int fd = vkg_open_regular(path, &sb, &what);
    if (fd < 0 && what) return vkg_error_set(err, VKG_ERR_IO, "%s: is %s, not a regular file", path, what);
    if (fd < 0) return vkg_error_set(err, VKG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (sb.st_size < 8) {
        close(fd);
        return vkg_error_set(err, VKG_ERR_FORMAT,
                             "%s: file is %lld bytes, too short for a safetensors file (it starts with an 8-byte "
                             "header length)", path, (long long)sb.st_size);
    }
    vkg_safetensors *st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(path))) {
        free(st);
        close(fd);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    /* Read with pread, never mapped: a file truncated while in use then gives a short read and a
     * message, where a mapping would kill the process with SIGBUS. */
    st->fd = fd;
    st->file_bytes = (uint64_t)sb.st_size;
    st->mtime = sb.st_mtim;
    st->inode = sb.st_ino;
    vkg_status status = parse_header(st, err);
    if (status != VKG_OK) {
        vkg_safetensors_close(st);
        return status;
    }
    *out = st;
    return VKG_OK;
}

void vkg_safetensors_close(vkg_safetensors *st) {
    if (!st) return;
    if (st->fd >= 0) close(st->fd);
    for (int i = 0; i < st->n_tensors; i++) free(st->tensors[i].name);
    for (int i = 0; i < st->n_meta; i++) {
        free(st->meta_keys[i]);
        free(st->meta_values[i]);
    }
    free(st->meta_keys);
    free(st->meta_values);
    free(st->tensors);
    free(st->by_name);
    free(st->path);
    free(st);
}

/* ---- lookups ----------------------------------------------------------------------------------- */

const char *vkg_safetensors_path(const vkg_safetensors *st) { return st ? st->path : NULL; }

int vkg_safetensors_count(const vkg_safetensors *st) { return st ? st->n_tensors : 0; }

const vkg_st_tensor *vkg_safetensors_tensor(const vkg_safetensors *st, int i) {
    return (st && i >= 0 && i < st->n_tensors) ? &st->tensors[i] : NULL;
}

const vkg_st_tensor *vkg_safetensors_find(const vkg_safetensors *st, const char *name) {
    if (!st || !name || !st->n_tensors) return NULL;
    vkg_st_tensor key = {0};
    key.name = (char *)name;
    const vkg_st_tensor *kp = &key;
    const vkg_st_tensor **hit = bsearch(&kp, st->by_name, (size_t)st->n_tensors, sizeof *st->by_name, compare_by_name);
    return hit ? *hit : NULL;
}

int vkg_safetensors_metadata_count(const vkg_safetensors *st) { return st ? st->n_meta : 0; }

const char *vkg_safetensors_metadata_key(const vkg_safetensors *st, int i) {
    return (st && i >= 0 && i < st->n_meta) ? st->meta_keys[i] : NULL;
}

const char *vkg_safetensors_metadata_get(const vkg_safetensors *st, const char *key) {
    for (int i = 0; st && key && i < st->n_meta; i++)
        if (strcmp(st->meta_keys[i], key) == 0) return st->meta_values[i];
    return NULL;
}

/* ---- writing ----------------------------------------------------------------------------------- */

/* Checks one tensor to write and returns its byte size (via *bytes). */
static vkg_status check_write(const vkg_st_write *w, int i, uint64_t *bytes, vkg_error *err) {
    if (!w->name || strcmp(w->name, "__metadata__") == 0)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "safetensors write: tensor %d has %s name", i,
                             w->name ? "the reserved" : "a NULL");
    if (vkg_st_dtype_size(w->dtype) == 0 || w->ndim < 0 || w->ndim > VKG_ST_MAX_DIMS)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "safetensors write: tensor \"%s\": bad dtype %d or ndim %d",
                             w->name, (int)w->dtype, w->ndim);
    uint64_t n = vkg_st_dtype_size(w->dtype);
    for (int d = 0; d < w->ndim; d++) {
        if (w->shape[d] < 0 || (w->shape[d] && n > (UINT64_MAX >> 1) / (uint64_t)w->shape[d]))
            return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                                 "safetensors write: tensor \"%s\": dimension %d is %lld", w->name, d,
                                 (long long)w->shape[d]);
        n *= (uint64_t)w->shape[d];
    }
    if (n && !w->data)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "safetensors write: tensor \"%s\" has NULL data",
                             w->name);
    *bytes = n;
    return VKG_OK;
}

vkg_status vkg_safetensors_write(const char *path, const vkg_st_write *tensors, int n, vkg_error *err) {
    if (!path || n < 0 || (n && !tensors))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "vkg_safetensors_write: bad arguments");
    uint64_t *bytes = calloc((size_t)n + 1, sizeof *bytes);
    char *header = NULL;
    size_t header_len = 0;
    FILE *h = bytes ? open_memstream(&header, &header_len) : NULL;
    if (!h) {
        free(bytes);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "%s: out of memory for the header", path);
    }
    vkg_status status = VKG_OK;
    uint64_t offset = 0;
    fputc('{', h);
    for (int i = 0; i < n && status == VKG_OK; i++) {
        const vkg_st_write *w = &tensors[i];
        if ((status = check_write(w, i, &bytes[i], err)) != VKG_OK) break;
        for (int j = 0; j < i; j++)
            if (strcmp(tensors[j].name, w->name) == 0)
                status = vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "safetensors write: tensor name \"%s\" is used twice",
                                       w->name);
        if (i) fputc(',', h);
        vkg_json_write_string(h, w->name);
        fprintf(h, ":{\"dtype\":\"%s\",\"shape\":[", vkg_st_dtype_name(w->dtype));
        for (int d = 0; d < w->ndim; d++) fprintf(h, "%s%lld", d ? "," : "", (long long)w->shape[d]);
        fprintf(h, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)offset,
                (unsigned long long)(offset + bytes[i]));
        offset += bytes[i];
    }
    fputc('}', h);
    /* The data section starts 64-byte aligned (the format asks for 8): a device that reads host
     * memory in place (vulkan/host_import.c) can then bind each tensor where it lies. */
    while ((8 + ftell(h)) % 64) fputc(' ', h);
    int mem_failed = fclose(h) != 0;
    FILE *f = NULL;
    if (status == VKG_OK && mem_failed)
        status = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "%s: out of memory for the header", path);
    if (status == VKG_OK && !(f = fopen(path, "wb")))
        status = vkg_error_set(err, VKG_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    if (status == VKG_OK) {
        unsigned char len8[8];
        for (int b = 0; b < 8; b++) len8[b] = (unsigned char)((uint64_t)header_len >> (8 * b));
        int ok = fwrite(len8, 1, 8, f) == 8 && fwrite(header, 1, header_len, f) == header_len;
        for (int i = 0; ok && i < n; i++) ok = !bytes[i] || fwrite(tensors[i].data, 1, bytes[i], f) == bytes[i];
        if (fclose(f) != 0) ok = 0;
        if (!ok) {
            status = vkg_error_set(err, VKG_ERR_IO, "%s: write failed: %s", path, strerror(errno));
            remove(path);
        }
    }
    free(header);
    free(bytes);
    return status;
}
