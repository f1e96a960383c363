#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "support/poked_model.h"

#include "base/half.h"
#include "models/gpt2_random.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void test_write_poked_gpt2(const char *dir, vkg_st_dtype dtype, int untied, const test_poke *pokes, int n_pokes) {
    vkg_gpt2_random_options o;
    vkg_gpt2_random_options_default(&o);
    o.dtype = dtype;
    o.untied_lm_head = untied;
    vkg_error err = {0};
    if (vkg_gpt2_write_random(dir, &o, &err) != VKG_OK) fail_msg("%s", err.message);
    char p[1300], q[1300];
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    snprintf(q, sizeof q, "%s/poked.safetensors", dir);
    vkg_safetensors *st = NULL;
    assert_int_equal(vkg_safetensors_open(p, &st, &err), VKG_OK);
    int n = vkg_safetensors_count(st), found = 0;
    vkg_st_write *w = calloc((size_t)n, sizeof *w);
    void **data = calloc((size_t)n, sizeof *data);
    assert_true(w && data);
    for (int i = 0; i < n; i++) {
        const vkg_st_tensor *t = vkg_safetensors_tensor(st, i);
        data[i] = malloc(t->bytes + 1);
        assert_non_null(data[i]);
        assert_int_equal(vkg_safetensors_read(st, t, t->dtype, data[i], &err), VKG_OK);
        w[i] = (vkg_st_write){.name = t->name, .dtype = t->dtype, .ndim = t->ndim, .data = data[i]};
        memcpy(w[i].shape, t->shape, sizeof w[i].shape);
        for (int j = 0; j < n_pokes; j++) {
            const test_poke *pk = &pokes[j];
            if (strcmp(t->name, pk->name) != 0) continue;
            found++;
            assert_true(pk->first + pk->count <= (size_t)vkg_st_tensor_numel(t));
            for (size_t k = pk->first; k < pk->first + pk->count; k++) {
                if (t->dtype == VKG_ST_F32) ((float *)data[i])[k] = pk->value;
                else if (t->dtype == VKG_ST_F16) ((uint16_t *)data[i])[k] = vkg_f32_to_f16(pk->value);
                else ((uint16_t *)data[i])[k] = vkg_f32_to_bf16(pk->value);
            }
        }
    }
    assert_int_equal(found, n_pokes); /* each poke's tensor is there */
    if (vkg_safetensors_write(q, w, n, &err) != VKG_OK) fail_msg("%s", err.message);
    vkg_safetensors_close(st);
    for (int i = 0; i < n; i++) free(data[i]);
    free(data);
    free(w);
    assert_int_equal(rename(q, p), 0);
}
