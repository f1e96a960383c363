/*
 * NumPy .npy files of float32: the format numpy.save writes and numpy.load reads, used to dump
 * tensors for inspection in Python and to compare against golden files.
 *
 * Format (NumPy's NEP 1, version 1.0): the magic "\x93NUMPY", version bytes 1 0, a little-endian
 * uint16 header length, then a Python dict literal such as
 *     {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * padded with spaces and ended by '\n' so that magic + length + header is a multiple of 64 bytes,
 * then the data: little-endian float32 in C (row-major) order.
 */
#ifndef VKGRAPH_NPY_H
#define VKGRAPH_NPY_H

#include "vkgraph.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VKG_NPY_MAX_DIMS 8

/* Writes data (the product of shape[0..ndim) floats) as a version 1.0 file.  ndim is 1 to 8 and
 * every extent >= 0.  On failure the partial file is removed (where it is a regular file: a
 * device such as /dev/full is left as it is). */
vkg_status vkg_npy_write_f32(const char *path, const float *data, int ndim, const int64_t *shape,
                             vkg_error *err);

/* The same written piece by piece, for data larger than one wants to hold at once (every layer's
 * attention probabilities of a long prompt): open writes the header for the shape, each append
 * the next n floats in C order, close checks that the shape's floats all came.  A failing call
 * (an append past the shape, a close short of it, a write error) removes the file as above and
 * frees the writer, which must not be used again; so does close. */
typedef struct vkg_npy_writer vkg_npy_writer;
vkg_status vkg_npy_writer_open(const char *path, int ndim, const int64_t *shape, vkg_npy_writer **w,
                               vkg_error *err);
vkg_status vkg_npy_writer_append(vkg_npy_writer *w, const float *data, size_t n, vkg_error *err);
vkg_status vkg_npy_writer_close(vkg_npy_writer *w, vkg_error *err);

/* Reads a float32 file ('<f4', C order; versions 1.0, 2.0 and 3.0).  On success *data is a
 * malloc'd array the caller frees with free() (never NULL, even for zero elements), *ndim is
 * 0 (a scalar) to 8 and shape[0..*ndim) holds the extents.  Anything else (another dtype,
 * Fortran order, a bad header, a size that does not match the shape) is VKG_ERR_FORMAT; on any
 * failure *data is NULL. */
vkg_status vkg_npy_read_f32(const char *path, float **data, int *ndim,
                            int64_t shape[VKG_NPY_MAX_DIMS], vkg_error *err);

#ifdef __cplusplus
}
#endif
#endif
