/* A .npy file of float32.  Whatever the bytes, reading either fails with a message or gives a
 * shape and exactly that many floats, which write back as a file that reads the same. */
#include "fuzz.h"

#include "vkgraph_npy.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_file("tensor.npy", data, size);
    float *values = NULL;
    int ndim = -1;
    int64_t shape[VKG_NPY_MAX_DIMS];
    vkg_error err;
    if (vkg_npy_read_f32(path, &values, &ndim, shape, &err) != VKG_OK) {
        FUZZ_CHECK(values == NULL && err.message[0] != '\0');
        return 0;
    }
    FUZZ_CHECK(values != NULL && ndim >= 0 && ndim <= VKG_NPY_MAX_DIMS);
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        FUZZ_CHECK(shape[i] >= 0);
        numel *= shape[i];
    }
    FUZZ_CHECK((uint64_t)numel * 4 <= size);
    /* The writer takes 1 to 8 dimensions: a scalar goes back as shape (1,). */
    int64_t one = 1;
    const char *again = fuzz_write_file("again.npy", "", 0);
    FUZZ_CHECK(vkg_npy_write_f32(again, values, ndim ? ndim : 1, ndim ? shape : &one, &err) == VKG_OK);
    float *back = NULL;
    int back_ndim = -1;
    int64_t back_shape[VKG_NPY_MAX_DIMS];
    FUZZ_CHECK(vkg_npy_read_f32(again, &back, &back_ndim, back_shape, &err) == VKG_OK);
    FUZZ_CHECK(back_ndim == (ndim ? ndim : 1));
    FUZZ_CHECK(memcmp(back_shape, ndim ? shape : &one, (size_t)back_ndim * sizeof *shape) == 0);
    FUZZ_CHECK(memcmp(back, values, (size_t)numel * sizeof *values) == 0);
    free(back);
    free(values);
    return 0;
}
