/* Writing and reading float32 .npy files; the format is described in npy.h. */
#include "vkgraph_npy.h"

#include "base/error.h"
#include "base/file_open.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char NPY_MAGIC[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};
enum {
    NPY_ALIGN = 64,              /* magic + length + header is padded to a multiple of this */
    NPY_MAX_HEADER = 1 << 20,    /* a float32 dict is ~100 bytes; refuse absurd lengths      */
    NPY_CHUNK = 4096             /* floats converted per write/read call                     */
};

/* Float <-> little-endian bytes through the bit pattern, so the file is the same on any host. */
static void f32_to_le(float value, unsigned char out[4]) {
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    for (int i = 0; i < 4; i++) out[i] = (unsigned char)(bits >> (8 * i));
}

static float f32_from_le(const unsigned char in[4]) {
    uint32_t bits = (uint32_t)in[0] | (uint32_t)in[1] << 8 | (uint32_t)in[2] << 16 |
                    (uint32_t)in[3] << 24;
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* ---------------------------------------------------------------------------------------------
 * Writing
 * ------------------------------------------------------------------------------------------- */

/* Builds the whole preamble (magic, version, length, padded dict) into buf; returns its length. */
static size_t npy_format_preamble(char *buf, size_t cap, int ndim, const int64_t *shape) {
    char dict[256];
    int len = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    for (int i = 0; i < ndim; i++)
        len += snprintf(dict + len, sizeof dict - (size_t)len, i ? ", %lld" : "%lld",
                        (long long)shape[i]);
    /* Python writes a one-element tuple as "(5,)". */
    len += snprintf(dict + len, sizeof dict - (size_t)len, ndim == 1 ? ",), }" : "), }");

    size_t unpadded = 10 + (size_t)len + 1; /* preamble + dict + '\n' */
    size_t total = (unpadded + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
    size_t header_len = total - 10;
    if (total > cap) return 0;
    memcpy(buf, NPY_MAGIC, sizeof NPY_MAGIC);
    buf[6] = 1; /* major version */
    buf[7] = 0; /* minor version */
    buf[8] = (char)(header_len & 0xff);
    buf[9] = (char)(header_len >> 8);
    memcpy(buf + 10, dict, (size_t)len);
    memset(buf + 10 + len, ' ', total - 10 - (size_t)len - 1);
    buf[total - 1] = '\n';
    return total;
}

static vkg_status npy_write_data(FILE *f, const float *data, int64_t numel) {
    unsigned char bytes[NPY_CHUNK * 4];
    for (int64_t start = 0; start < numel; start += NPY_CHUNK) {
        int64_t count = numel - start < NPY_CHUNK ? numel - start : NPY_CHUNK;
        for (int64_t i = 0; i < count; i++) f32_to_le(data[start + i], bytes + 4 * i);
        if (fwrite(bytes, 4, (size_t)count, f) != (size_t)count) return VKG_ERR_IO;
    }
    return VKG_OK;
}

struct vkg_npy_writer {
    FILE *f;
    char *path;
    int64_t numel, written; /* floats the shape holds, floats appended so far */
    int regular;            /* the path is a regular file: a failed write removes it (never a
                               device such as /dev/full, a pipe or a terminal) */
};

/* Closes w's file (unless already closed), removes it where it is a regular file and frees w. */
static void discard(vkg_npy_writer *w) {
    if (w->f) fclose(w->f);
    if (w->regular) remove(w->path);
    free(w->path);
    free(w);
}

/* A write error (errno e) on w: err set, w discarded. */
static vkg_status write_error(vkg_npy_writer *w, int e, vkg_error *err) {
    vkg_status st = vkg_error_set(err, VKG_ERR_IO, "cannot write %s: %s", w->path, strerror(e));
    discard(w);
    return st;
}

vkg_status vkg_npy_writer_open(const char *path, int ndim, const int64_t *shape, vkg_npy_writer **out,
                               vkg_error *err) {
    if (out) *out = NULL;
    if (!path || !shape || !out || ndim < 1 || ndim > VKG_NPY_MAX_DIMS)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                             "npy write: need a path, and 1 to %d dimensions (got %d)",
                             VKG_NPY_MAX_DIMS, ndim);
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || (shape[i] > 0 && numel > INT64_MAX / 4 / shape[i]))
            return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                                 "npy write %s: extent %lld of dimension %d is negative or too big",
                                 path, (long long)shape[i], i);
        numel *= shape[i];
    }
    char preamble[512];
    size_t preamble_len = npy_format_preamble(preamble, sizeof preamble, ndim, shape);
    vkg_npy_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        free(w);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "npy write %s: out of memory", path);
    }
    w->numel = numel;
    if (!(w->f = fopen(path, "wb"))) {
        vkg_status st = vkg_error_set(err, VKG_ERR_IO, "cannot create %s: %s", path, strerror(errno));
        discard(w); /* nothing to close or remove */
        return st;
    }
    struct stat sb;
    w->regular = fstat(fileno(w->f), &sb) == 0 && S_ISREG(sb.st_mode);
    if (fwrite(preamble, 1, preamble_len, w->f) != preamble_len) return write_error(w, errno, err);
    *out = w;
    return VKG_OK;
}

vkg_status vkg_npy_writer_append(vkg_npy_writer *w, const float *data, size_t n, vkg_error *err) {
    if (!w) return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "npy write: no writer");
    if (n > (uint64_t)(w->numel - w->written) || (n > 0 && !data)) {
        vkg_status st = vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                                      "npy write %s: %zu more floats%s, where the shape holds %lld and %lld are written",
                                      w->path, n, data ? "" : " from NULL", (long long)w->numel, (long long)w->written);
        discard(w);
        return st;
    }
    if (npy_write_data(w->f, data, (int64_t)n) != VKG_OK) return write_error(w, errno, err);
    w->written += (int64_t)n;
    return VKG_OK;
}

vkg_status vkg_npy_writer_close(vkg_npy_writer *w, vkg_error *err) {
    if (!w) return VKG_OK;
    if (w->written != w->numel) {
        vkg_status st = vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "npy write %s: %lld of the shape's %lld floats written",
                                      w->path, (long long)w->written, (long long)w->numel);
        discard(w);
        return st;
    }
    const int closed = fclose(w->f) == 0, e = errno;
    w->f = NULL;
    if (!closed) return write_error(w, e, err);
    free(w->path);
    free(w);
    return VKG_OK;
}

vkg_status vkg_npy_write_f32(const char *path, const float *data, int ndim, const int64_t *shape,
                             vkg_error *err) {
    vkg_npy_writer *w = NULL;
    vkg_status st = vkg_npy_writer_open(path, ndim, shape, &w, err);
    if (st == VKG_OK) st = vkg_npy_writer_append(w, data, (size_t)w->numel, err);
    if (st == VKG_OK) st = vkg_npy_writer_close(w, err);
    return st;
}

/* ---------------------------------------------------------------------------------------------
 * Reading: a small parser for the header dict, which is a Python literal.  Keys may come in any
 * order with any spacing; the three keys NumPy writes must all be there and nothing else.
 * ------------------------------------------------------------------------------------------- */

typedef struct npy_parser {
    const char *p, *end;
} npy_parser;

static void skip_space(npy_parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

static int accept_char(npy_parser *ps, char c) {
    skip_space(ps);
    if (ps->p < ps->end && *ps->p == c) {
        ps->p++;
        return 1;
    }
    return 0;
}

static int accept_word(npy_parser *ps, const char *word) {
    skip_space(ps);
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, word, n) == 0) {
        ps->p += n;
        return 1;
    }
    return 0;
}

/* A quoted string ('...' or "...", no escapes: descr and key names never need them). */
static int parse_string(npy_parser *ps, char *out, size_t cap) {
    skip_space(ps);
    if (ps->p >= ps->end || (*ps->p != '\'' && *ps->p != '"')) return 0;
    char quote = *ps->p++;
    size_t n = 0;
    while (ps->p < ps->end && *ps->p != quote) {
        if (n + 1 >= cap) return 0;
        out[n++] = *ps->p++;
    }
    if (ps->p >= ps->end) return 0;
    ps->p++;
    out[n] = '\0';
    return 1;
}

/* A tuple of non-negative integers: "()", "(5,)", "(2, 3)", trailing comma allowed. */
static int parse_shape(npy_parser *ps, int *ndim, int64_t shape[VKG_NPY_MAX_DIMS]) {
    if (!accept_char(ps, '(')) return 0;
    *ndim = 0;
    for (;;) {
        if (accept_char(ps, ')')) return 1;
        if (*ndim == VKG_NPY_MAX_DIMS) return 0;
        skip_space(ps);
        int64_t value = 0;
        int digits = 0;
        while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9') {
            if (value > (INT64_MAX - 9) / 10) return 0;
            value = value * 10 + (*ps->p++ - '0');
            digits++;
        }
        if (!digits) return 0;
        shape[(*ndim)++] = value;
        if (!accept_char(ps, ',')) return accept_char(ps, ')');
    }
}

static vkg_status parse_header(const char *path, const char *text, size_t len, int *ndim,
                               int64_t shape[VKG_NPY_MAX_DIMS], vkg_error *err) {
    npy_parser ps = {text, text + len};
    int have_descr = 0, have_order = 0, have_shape = 0;
    if (!accept_char(&ps, '{'))
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: npy header does not start with '{'", path);
    while (!accept_char(&ps, '}')) {
        char key[32], descr[32];
        if (!parse_string(&ps, key, sizeof key) || !accept_char(&ps, ':'))
            return vkg_error_set(err, VKG_ERR_FORMAT, "%s: npy header is not a dict near offset %d",
                                 path, (int)(ps.p - text));
        if (strcmp(key, "descr") == 0) {
            if (!parse_string(&ps, descr, sizeof descr))
                return vkg_error_set(err, VKG_ERR_FORMAT, "%s: npy 'descr' is not a string", path);
            if (strcmp(descr, "<f4") != 0)
                return vkg_error_set(err, VKG_ERR_FORMAT,
                                     "%s: dtype '%s', expected little-endian float32 '<f4' "
                                     "(convert with numpy: a.astype('<f4'))", path, descr);
            have_descr = 1;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (accept_word(&ps, "True"))
                return vkg_error_set(err, VKG_ERR_FORMAT,
                                     "%s: Fortran-order array; save a C-order copy "
                                     "(numpy.ascontiguousarray)", path);
            if (!accept_word(&ps, "False"))
                return vkg_error_set(err, VKG_ERR_FORMAT,
                                     "%s: npy 'fortran_order' is neither True nor False", path);
            have_order = 1;
        } else if (strcmp(key, "shape") == 0) {
            if (!parse_shape(&ps, ndim, shape))
                return vkg_error_set(err, VKG_ERR_FORMAT,
                                     "%s: npy 'shape' is not a tuple of at most %d integers", path,
                                     VKG_NPY_MAX_DIMS);
            have_shape = 1;
        } else {
            return vkg_error_set(err, VKG_ERR_FORMAT, "%s: unknown npy header key '%s'", path, key);
        }
        if (!accept_char(&ps, ',')) {
            if (!accept_char(&ps, '}'))
                return vkg_error_set(err, VKG_ERR_FORMAT, "%s: npy header dict is not closed",
                                     path);
            break;
        }
    }
    if (!have_descr || !have_order || !have_shape)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: npy header lacks '%s'", path,
                             !have_descr ? "descr" : !have_order ? "fortran_order" : "shape");
    skip_space(&ps);
    if (ps.p != ps.end)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: text after the npy header dict", path);
    return VKG_OK;
}

/* Reads the preamble and the dict; leaves f at the first data byte and sets *data_offset. */
static vkg_status read_header(FILE *f, const char *path, int *ndim,
                              int64_t shape[VKG_NPY_MAX_DIMS], long long *data_offset,
                              vkg_error *err) {
    unsigned char head[12];
    if (fread(head, 1, 8, f) != 8 || memcmp(head, NPY_MAGIC, sizeof NPY_MAGIC) != 0)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: not a .npy file (no \\x93NUMPY magic)",
                             path);
    int major = head[6], minor = head[7];
    if ((major < 1 || major > 3) || minor != 0)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: npy version %d.%d, expected 1.0 to 3.0",
                             path, major, minor);
    /* Version 1 stores the header length in 2 bytes, versions 2 and 3 in 4. */
    size_t len_bytes = major == 1 ? 2 : 4;
    if (fread(head + 8, 1, len_bytes, f) != len_bytes)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: truncated npy preamble", path);
    uint32_t header_len = 0;
    for (size_t i = 0; i < len_bytes; i++) header_len |= (uint32_t)head[8 + i] << (8 * i);
    if (header_len > NPY_MAX_HEADER)
        return vkg_error_set(err, VKG_ERR_FORMAT, "%s: npy header of %u bytes is implausible",
                             path, header_len);
    char *text = malloc(header_len ? header_len : 1);
    if (!text) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "%s: npy header", path);
    vkg_status st = VKG_OK;
    if (fread(text, 1, header_len, f) != header_len)
        st = vkg_error_set(err, VKG_ERR_FORMAT, "%s: truncated npy header (%u bytes announced)",
                           path, header_len);
    else
        st = parse_header(path, text, header_len, ndim, shape, err);
    free(text);
    *data_offset = 8 + (long long)len_bytes + header_len;
    return st;
}

static vkg_status read_data(FILE *f, const char *path, float *data, int64_t numel,
                            vkg_error *err) {
    unsigned char bytes[NPY_CHUNK * 4];
    for (int64_t start = 0; start < numel; start += NPY_CHUNK) {
        int64_t count = numel - start < NPY_CHUNK ? numel - start : NPY_CHUNK;
        if (fread(bytes, 4, (size_t)count, f) != (size_t)count)
            return vkg_error_set(err, VKG_ERR_IO, "%s: read failed after %lld of %lld floats",
                                 path, (long long)start, (long long)numel);
        for (int64_t i = 0; i < count; i++) data[start + i] = f32_from_le(bytes + 4 * i);
    }
    return VKG_OK;
}

vkg_status vkg_npy_read_f32(const char *path, float **data, int *ndim,
                            int64_t shape[VKG_NPY_MAX_DIMS], vkg_error *err) {
    if (!path || !data || !ndim || !shape)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "npy read: NULL argument");
    *data = NULL;
    struct stat info;
    const char *what;
    FILE *f = vkg_fopen_regular(path, &info, &what);
    if (!f && what) return vkg_error_set(err, VKG_ERR_IO, "%s: is %s, not a regular file", path, what);
    if (!f) {
        vkg_status st = errno == ENOENT ? VKG_ERR_NOT_FOUND : VKG_ERR_IO;
        return vkg_error_set(err, st, "cannot open %s: %s", path, strerror(errno));
    }

    int file_ndim = 0;
    int64_t file_shape[VKG_NPY_MAX_DIMS];
    long long data_offset = 0;
    vkg_status st = read_header(f, path, &file_ndim, file_shape, &data_offset, err);
    if (st != VKG_OK) {
        fclose(f);
        return st;
    }

    /* The data must be exactly numel floats: no more, no less, checked before allocating. */
    long long data_bytes = (long long)info.st_size - data_offset;
    int64_t numel = 1;
    for (int i = 0; i < file_ndim; i++) {
        if (file_shape[i] > 0 && numel > INT64_MAX / 4 / file_shape[i]) {
            fclose(f);
            return vkg_error_set(err, VKG_ERR_FORMAT, "%s: npy shape too large", path);
        }
        numel *= file_shape[i];
    }
    if (data_bytes != numel * 4) {
        fclose(f);
        return vkg_error_set(err, VKG_ERR_FORMAT,
                             "%s: shape needs %lld bytes of data but the file holds %lld%s", path,
                             (long long)(numel * 4), data_bytes,
                             data_bytes < numel * 4 ? " (truncated?)" : "");
    }

    float *values = malloc(numel > 0 ? (size_t)numel * sizeof *values : sizeof *values);
    if (!values) {
        fclose(f);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "%s: %lld floats", path,
                             (long long)numel);
    }
    st = read_data(f, path, values, numel, err);
    fclose(f);
    if (st != VKG_OK) {
        free(values);
        return st;
    }
    *data = values;
    *ndim = file_ndim;
    for (int i = 0; i < file_ndim; i++) shape[i] = file_shape[i];
    return VKG_OK;
}
