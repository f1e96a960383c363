/*
 * Reading and writing .safetensors files.
 *
 * The format: 8 bytes of header length N (u64, little endian), N bytes of JSON header, then the
 * data section.  The header is an object: each key is a tensor name, mapped to
 *   {"dtype": "F32", "shape": [768, 2304], "data_offsets": [begin, end]}
 * with offsets relative to the start of the data section; the optional key "__metadata__" maps
 * to an object of strings.
 *
 * vkg_safetensors_open reads the header and checks everything before returning: the header
 * length, the JSON, each entry's dtype, shape and offsets, that shape x dtype size equals the
 * byte range, that the range lies inside the data section and that no two tensors overlap.
 * Every failure is VKG_ERR_FORMAT (VKG_ERR_IO when the file cannot be read) with a message that
 * names the file, the tensor and the numbers involved.
 *
 * Tensor data is read on request into the caller's memory (vkg_safetensors_read), with pread on
 * the descriptor kept open until vkg_safetensors_close; the file is never mapped, so one
 * truncated or replaced while in use ends in an error message, not in SIGBUS.  Values are
 * little endian, as the format defines.
 */
#ifndef VKG_IO_SAFETENSORS_H
#define VKG_IO_SAFETENSORS_H

#include "base/half.h"
#include "vkgraph.h"

#include <stddef.h>
#include <stdint.h>

#define VKG_ST_MAX_DIMS 8
/* Headers above this size are refused as corrupt (the reference implementation's limit too). */
#define VKG_ST_MAX_HEADER_BYTES 100000000ull

/* Element types named in headers.  Every one can be listed; vkg_safetensors_read converts between
 * F32, F16 and BF16 only (vkg_st_dtype_convertible says which). */
typedef enum vkg_st_dtype {
    VKG_ST_F32, VKG_ST_F16, VKG_ST_BF16, VKG_ST_F64, VKG_ST_I64,
    VKG_ST_I32, VKG_ST_I16, VKG_ST_I8, VKG_ST_U8, VKG_ST_BOOL
} vkg_st_dtype;

typedef struct vkg_st_tensor {
    char *name;
    vkg_st_dtype dtype;
    int ndim;                        /* 0 for a scalar                                       */
    int64_t shape[VKG_ST_MAX_DIMS];
    uint64_t bytes;                  /* element count x dtype size                           */
    uint64_t offset;                 /* of its first byte in the file                        */
} vkg_st_tensor;

typedef struct vkg_safetensors vkg_safetensors;

vkg_status vkg_safetensors_open(const char *path, vkg_safetensors **out, vkg_error *err);
void vkg_safetensors_close(vkg_safetensors *st); /* NULL is fine */
const char *vkg_safetensors_path(const vkg_safetensors *st);

/* Tensors in the order the header lists them. */
int vkg_safetensors_count(const vkg_safetensors *st);
const vkg_st_tensor *vkg_safetensors_tensor(const vkg_safetensors *st, int i); /* NULL if out of range */
const vkg_st_tensor *vkg_safetensors_find(const vkg_safetensors *st, const char *name); /* NULL if absent */

/* The "__metadata__" strings, in header order; get returns NULL when the key is absent. */
int vkg_safetensors_metadata_count(const vkg_safetensors *st);
const char *vkg_safetensors_metadata_key(const vkg_safetensors *st, int i);
const char *vkg_safetensors_metadata_get(const vkg_safetensors *st, const char *key);

const char *vkg_st_dtype_name(vkg_st_dtype d);   /* "F32", "BF16", ...; "?" when out of range */
size_t vkg_st_dtype_size(vkg_st_dtype d);        /* bytes per element; 0 when out of range   */
int vkg_st_dtype_convertible(vkg_st_dtype d);    /* 1 for F32, F16, BF16                     */
int64_t vkg_st_tensor_numel(const vkg_st_tensor *t); /* 1 for a scalar                       */

/* Reads tensor t of st into dst as `as`: the bytes as stored when as is t's own dtype (any dtype),
 * else converted between F32, F16 and BF16 (f32 -> f16/bf16 rounds to nearest even; other
 * dtypes: VKG_ERR_UNSUPPORTED).  dst holds numel elements of `as`, any alignment for a plain
 * read, the element's for a conversion.  A file shorter than at open (truncated while in use)
 * is VKG_ERR_IO saying so. */
vkg_status vkg_safetensors_read(const vkg_safetensors *st, const vkg_st_tensor *t, vkg_st_dtype as, void *dst,
                                vkg_error *err);
/* VKG_ERR_IO unless the file still has the size, modification time and inode it had at open:
 * call it after the reads to know they came from one version of the file. */
vkg_status vkg_safetensors_check_unchanged(const vkg_safetensors *st, vkg_error *err);

/* Writing, used by the random-model generator and tests.  data holds the tensor's elements in
 * the file's layout (little endian); it may be NULL only when the tensor has no elements.  The
 * header is padded with spaces so the data section starts 8-byte aligned. */
typedef struct vkg_st_write {
    const char *name;
    vkg_st_dtype dtype;
    int ndim;
    int64_t shape[VKG_ST_MAX_DIMS];
    const void *data;
} vkg_st_write;

vkg_status vkg_safetensors_write(const char *path, const vkg_st_write *tensors, int n, vkg_error *err);

/* Element conversions (vkg_f16_to_f32, vkg_f32_to_bf16, ...) are in core/half.h. */

#endif
