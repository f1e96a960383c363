/* Times of the Llama-family kernels at SmolLM2-135M's shapes (C 576, 9 query heads over 3
 * key/value heads of 64, MLP 1536) for one layer: rms_norm of the residual rows, rope of the
 * query and key heads, grouped-query attention over a 2048-row cache, and the up projection
 * with swiglu in its epilogue.  A prefill of T tokens (after none cached) and a decode step (one
 * token after 2047), on each device named, from the device's profile after two warm-up runs.
 *
 *   vkg_bench_llama_ops [T] [device...]     (defaults: 512 cpu vulkan)
 *
 * Inputs are random: the times do not depend on the values. */
#include "vkgraph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { C = 576, H = 9, HKV = 3, D = 64, I = 1536, S = 2048, RUNS = 5 };

static float *randoms(vkg_rng *r, size_t n) {
    float *x = malloc(n * sizeof *x);
    if (x) vkg_rng_fill_normal(r, x, n, 1.0f);
    return x;
}

/* One layer's new ops for T tokens at positions pos .. pos + T - 1. */
static int bench(const char *spec, int T, int32_t pos) {
    vkg_device_options o = {.quiet = 1, .profile = 1};
    vkg_device *dev = NULL;
    vkg_error err;
    if (vkg_device_open(spec, &o, &dev, &err) != VKG_OK) {
        fprintf(stderr, "%s: %s\n", spec, err.message);
        return 1;
    }
    vkg_rng r;
    vkg_rng_seed(&r, 1);
    float *gamma = randoms(&r, C), *table = randoms(&r, (size_t)S * D), *w_up = randoms(&r, (size_t)I * C);
    float *x_in = randoms(&r, (size_t)T * C), *q_in = randoms(&r, (size_t)T * H * D), *k_in = randoms(&r, (size_t)T * HKV * D);
    float *g_in = randoms(&r, (size_t)T * I);
    vkg_graph *g = vkg_graph_new();
    vkg_tensor x = vkg_input(g, "x", VKG_F32, 2, (int64_t[]){T, C});
    vkg_tensor q = vkg_input(g, "q", VKG_F32, 2, (int64_t[]){T, H * D});
    vkg_tensor k = vkg_input(g, "k", VKG_F32, 2, (int64_t[]){T, HKV * D});
    vkg_tensor gate = vkg_input(g, "gate", VKG_F32, 2, (int64_t[]){T, I});
    vkg_tensor cache = vkg_state(g, "kv_cache", 4, (int64_t[]){2, HKV, S, D});
    vkg_tensor index = vkg_index(g, "pos");
    vkg_tensor cs = vkg_constant(g, "cos_sin", VKG_F32, 2, (int64_t[]){S, D}, table);
    /* rms_norm of the rows, and the up projection with swiglu on them */
    vkg_tensor n = vkg_rms_norm(g, x, vkg_constant(g, "norm.weight", VKG_F32, 1, (int64_t[]){C}, gamma), 1e-5f);
    vkg_tensor up = vkg_matmul(g, n, vkg_constant(g, "up.weight", VKG_F32, 2, (int64_t[]){I, C}, w_up), VKG_NONE,
                               VKG_TRANSPOSE_B);
    vkg_output(g, "mlp", vkg_swiglu(g, gate, up));
    /* query heads [HKV, G, T, D] and key heads [HKV, T, D] rotated, the keys written to the cache */
    vkg_tensor qh = vkg_permute(g, vkg_reshape(g, q, 4, (int64_t[]){T, HKV, H / HKV, D}), (int[]){1, 2, 0, 3});
    qh = vkg_rope(g, qh, cs, 0, index);
    vkg_tensor kh = vkg_permute(g, vkg_reshape(g, k, 3, (int64_t[]){T, HKV, D}), (int[]){1, 0, 2});
    kh = vkg_rope(g, kh, cs, 0, index);
    vkg_tensor kv = vkg_reshape(g, vkg_concat(g, kh, kh, 0), 4, (int64_t[]){2, HKV, T, D});
    kv = vkg_write_at(g, cache, kv, 2, 0, index);
    vkg_tensor kc = vkg_reshape(g, vkg_slice(g, kv, 0, 0, 1), 4, (int64_t[]){HKV, 1, S, D});
    vkg_tensor vc = vkg_reshape(g, vkg_slice(g, kv, 0, 1, 1), 4, (int64_t[]){HKV, 1, S, D});
    vkg_tensor sc = vkg_scale(g, vkg_matmul(g, qh, kc, VKG_NONE, VKG_TRANSPOSE_B), 0.125f);
    sc = vkg_mask_causal(g, sc, 0, index);
    vkg_output(g, "attn", vkg_matmul(g, vkg_softmax(g, sc), vc, VKG_NONE, 0));
    vkg_compile_options co;
    vkg_compile_options_default(&co);
    vkg_device_compile_options(dev, &co);
    vkg_plan *p = NULL;
    vkg_session *s = NULL;
    int rc = 1;
    if (vkg_graph_status(g) != VKG_OK) {
        fprintf(stderr, "graph: %s\n", vkg_graph_error(g));
        goto done;
    }
    if (vkg_plan_compile(g, &co, &p, &err) != VKG_OK || vkg_session_new(dev, p, &s, &err) != VKG_OK ||
        vkg_session_set_input(s, x, x_in, (size_t)T * C * 4, &err) != VKG_OK ||
        vkg_session_set_input(s, q, q_in, (size_t)T * H * D * 4, &err) != VKG_OK ||
        vkg_session_set_input(s, k, k_in, (size_t)T * HKV * D * 4, &err) != VKG_OK ||
        vkg_session_set_input(s, gate, g_in, (size_t)T * I * 4, &err) != VKG_OK ||
        vkg_session_set_index(s, index, pos, &err) != VKG_OK) {
        fprintf(stderr, "%s\n", err.message);
        goto done;
    }
    for (int i = 0; i < 2; i++)
        if (vkg_session_run(s, &err) != VKG_OK) {
            fprintf(stderr, "%s\n", err.message);
            goto done;
        }
    size_t from = vkg_device_profile_event_count(dev);
    for (int i = 0; i < RUNS; i++)
        if (vkg_session_run(s, &err) != VKG_OK) {
            fprintf(stderr, "%s\n", err.message);
            goto done;
        }
    printf("%-32.32s T=%-4d pos=%-4d", vkg_device_name(dev), T, (int)pos);
    static const char *const kernels[] = {"rms_norm", "rope", "attention", "matmul"};
    static const char *const shown[] = {"rms_norm", "rope(q+k)", "attention", "up+swiglu"};
    for (int i = 0; i < 4; i++)
        printf("  %s %8.1f us", shown[i], 1e6 * vkg_device_profile_kernel_seconds(dev, from, kernels[i], NULL) / RUNS);
    printf("\n");
    rc = 0;
done:
    vkg_session_free(s);
    vkg_plan_free(p);
    vkg_graph_free(g);
    vkg_device_free(dev);
    free(gamma), free(table), free(w_up), free(x_in), free(q_in), free(k_in), free(g_in);
    return rc;
}

int main(int argc, char **argv) {
    int T = argc > 1 ? atoi(argv[1]) : 512;
    if (T < 1 || T > S) {
        fprintf(stderr, "usage: vkg_bench_llama_ops [T (1..%d)] [device...]\n", S);
        return 1;
    }
    static const char *const defaults[] = {"cpu", "vulkan"};
    const char *const *devs = argc > 2 ? (const char *const *)argv + 2 : defaults;
    int n = argc > 2 ? argc - 2 : 2, rc = 0;
    for (int i = 0; i < n; i++) {
        rc |= bench(devs[i], T, 0);            /* prefill */
        rc |= bench(devs[i], 1, S - 1);        /* decode at the cache's last row */
    }
    return rc;
}
