/* A .safetensors file: the 8-byte length, the JSON header and the data section.  Whatever the
 * bytes, opening either fails with a message or gives tensors whose byte ranges agree with their
 * shapes and dtypes, that read as f32 (and as stored), and that lookups by name find; the file is
 * unchanged after the reads. */
#include "fuzz.h"

#include "io/safetensors.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_file("model.safetensors", data, size);
    vkg_safetensors *st = NULL;
    vkg_error err;
    vkg_status status = vkg_safetensors_open(path, &st, &err);
    if (status != VKG_OK) {
        FUZZ_CHECK(st == NULL && err.message[0] != '\0');
        return 0;
    }
    uint64_t total = 0;
    for (int i = 0; i < vkg_safetensors_count(st); i++) {
        const vkg_st_tensor *t = vkg_safetensors_tensor(st, i);
        FUZZ_CHECK(t && t->name);
        FUZZ_CHECK(vkg_safetensors_find(st, t->name) == t);
        FUZZ_CHECK(t->ndim >= 0 && t->ndim <= VKG_ST_MAX_DIMS);
        int64_t numel = vkg_st_tensor_numel(t);
        FUZZ_CHECK(numel >= 0);
        FUZZ_CHECK(t->bytes == (uint64_t)numel * vkg_st_dtype_size(t->dtype));
        total += t->bytes;
        FUZZ_CHECK(total <= size); /* tensors do not overlap and lie inside the file */
        if (vkg_st_dtype_convertible(t->dtype)) {
            float *f = malloc(numel ? (size_t)numel * sizeof *f : 1);
            FUZZ_CHECK(f != NULL);
            FUZZ_CHECK(vkg_safetensors_read(st, t, VKG_ST_F32, f, &err) == VKG_OK);
            free(f);
        } else {
            float one;
            FUZZ_CHECK(vkg_safetensors_read(st, t, VKG_ST_F32, &one, &err) == VKG_ERR_UNSUPPORTED);
        }
        void *raw = malloc(t->bytes ? (size_t)t->bytes : 1);
        FUZZ_CHECK(raw != NULL);
        FUZZ_CHECK(vkg_safetensors_read(st, t, t->dtype, raw, &err) == VKG_OK); /* as stored: a plain read */
        free(raw);
    }
    FUZZ_CHECK(vkg_safetensors_check_unchanged(st, &err) == VKG_OK);
    FUZZ_CHECK(vkg_safetensors_tensor(st, vkg_safetensors_count(st)) == NULL);
    for (int i = 0; i < vkg_safetensors_metadata_count(st); i++) {
        const char *key = vkg_safetensors_metadata_key(st, i);
        FUZZ_CHECK(key != NULL && vkg_safetensors_metadata_get(st, key) != NULL);
    }
    vkg_safetensors_close(st);
    return 0;
}
