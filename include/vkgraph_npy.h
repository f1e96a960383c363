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
 * every extent >= 0.  On failure the partial file is removed. */
vkg_status vkg_npy_write_f32(const char *path, const float *data, int ndim, const int64_t *shape,
                             vkg_error *err);

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
