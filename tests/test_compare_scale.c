/* vkg_session_compare at the scale users run it, Vulkan (with the validation layer) against the
 * CPU executor, every step judged on the reference's inputs:
 *   - a model of GPT-2 124M's shapes (12 layers, 12 heads, 768 wide, 1024 positions, 50257
 *     tokens; random weights): the forward pass over 1024 tokens, logits at every position, and
 *     one decode step at position 1023 over a KV cache that each device's own prefill of 1023
 *     tokens filled;
 *   - the same shapes with 2 layers: a batched decode step of 8 sequences (a batch context's
 *     plan, as `vkgraph compare --decode --batch 8` runs it), rows at positions 1000 down to 6
 *     over caches of 1024 positions, each sequence prefilled alone into its own slot;
 *   - a model of SmolLM2-135M's shapes (576 wide, 9 query heads over 3 key/value heads, MLP 1536,
 *     49152 tokens, tied; 2 of its 30 layers): the forward pass over 2048 tokens, its rms_norm,
 *     rope, grouped-query attention and gated-MLP steps among them; and the same model with one
 *     weight (layer 1's fused q/k/v projection) damaged on the Vulkan device only, found at the one step that
 *     reads it and at no other;
 *   - a model of Qwen3-0.6B's shapes (2 of its 28 layers; heads of 128, 16 over 8, q/k norms):
 *     the batched decode step of 8 sequences over caches of 2048.
 * Every step must stay within its op's threshold, and the free-running drift of the last step
 * (the logits) within the threshold a whole model is held to.  Each run prints its closest step
 * and its drift.
 *
 * Too slow under the sanitizers, so it runs in the Release leg of the test command only (see
 * CMakeLists.txt); the fast cases are tests/test_compare.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "vkgraph.h"
#include "vkgraph_conformance.h"
#include "vkgraph_model.h"
#include "runtime/session.h"
#include "support/decode_compare.h"
#include "support/test_util.h"
#include "support/vk_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define T_MAX 1024
#define T_LLAMA 2048

static char *dir, *llama_dir;
static vkg_model *model;
static int32_t ids[T_LLAMA], positions[T_LLAMA];
static vkg_device *cpu, *gpu;

/* A fresh folder holding 2 layers of a Llama-family model of `shape` with random weights; NULL
 * (the reason printed) if it cannot be written. */
static char *random_llama(const char *name, const char *shape, uint64_t seed) {
    char *d = test_tmpdir(name);
    vkg_random_model_options o;
    vkg_random_model_options_default(&o);
    o.shape = shape;
    o.n_layer = 2;
    o.seed = seed;
    vkg_error err = {0};
    if (d && vkg_random_model_write(d, &o, &err) != VKG_OK) {
        fprintf(stderr, "%s\n", err.message);
        test_remove_tree(d);
        free(d);
        d = NULL;
    }
    return d;
}

static int setup(void **state) {
    (void)state;
    dir = test_tmpdir("comparescale");
    vkg_random_gpt2_options o;
    vkg_random_gpt2_options_default(&o);
    vkg_error err = {0};
    if (vkg_random_gpt2_size("gpt2", &o, &err) != VKG_OK) return -1;
    o.seed = 124;
    vkg_device_options co = {.quiet = 1};
    if (vkg_random_gpt2_write(dir, &o, &err) != VKG_OK || vkg_device_open("cpu", &co, &cpu, &err) != VKG_OK) {
        fprintf(stderr, "%s\n", err.message);
        return -1;
    }
    if (!(llama_dir = random_llama("comparescale-llama", "smollm2-135m", 135))) return -1;
    vkg_rng rng;
    vkg_rng_seed(&rng, 2024);
    /* ids below GPT-2's vocabulary, which is the smaller */
    for (int i = 0; i < T_LLAMA; i++) {
        ids[i] = (int32_t)(vkg_rng_next(&rng) % (uint64_t)o.vocab_size);
        positions[i] = i;
    }
    return 0;
}

static int teardown(void **state) {
    (void)state;
    vkg_device_free(cpu);
    if (dir) assert_int_equal(test_remove_tree(dir), 0);
    if (llama_dir) assert_int_equal(test_remove_tree(llama_dir), 0);
    free(dir);
    free(llama_dir);
    return 0;
}

/* The model opened for the Vulkan device (as `vkgraph compare` opens it: the weights laid out as
 * the device under test reads them best; the CPU runs the same plan). */
static void open_model_from(const char *from, int no_host_import) {
    /* A whole prefill of 1023 tokens is one submission: on lavapipe, on a machine shared with
     * other work, it can take minutes. */
    gpu = vk_test_open_with((vkg_device_options){.timeout_ms = 900000, .no_host_import = no_host_import});
    vkg_model_options mo = {.no_tokenizer = 1};
    vkg_error err = {0};
    if (vkg_model_open(from, gpu, &mo, &model, &err) != VKG_OK) fail_msg("%s", err.message);
}
static void open_model(void) { open_model_from(dir, 0); }

static void close_model(void) {
    vkg_model_free(model);
    model = NULL;
    vk_test_close(gpu);
    gpu = NULL;
}

static vkg_graph *build(int tokens, int n_ctx, vkg_logits_mode logits) {
    vkg_model_graph_options o;
    vkg_model_graph_options_default(&o, tokens);
    o.n_ctx = n_ctx;
    o.logits = logits;
    vkg_graph *g = NULL;
    vkg_error err = {0};
    if (vkg_model_build_graph(model, &o, &g, &err) != VKG_OK) fail_msg("%s", err.message);
    return g;
}

static vkg_plan *compile_for_both(vkg_graph *g) {
    vkg_compile_options o;
    vkg_compile_options_default(&o);
    vkg_device_compile_options(gpu, &o);
    vkg_device_compile_options(cpu, &o);
    vkg_plan *p = NULL;
    vkg_error err = {0};
    if (vkg_plan_compile(g, &o, &p, &err) != VKG_OK) fail_msg("%s", err.message);
    return p;
}

static void set_tokens(vkg_session *s, const vkg_graph *g, const int32_t *id, const int32_t *pos, int n, int start) {
    vkg_error err = {0};
    assert_int_equal(vkg_session_set_input(s, vkg_find(g, "ids"), id, (size_t)n * sizeof *id, &err), VKG_OK);
    assert_int_equal(vkg_session_set_input(s, vkg_find(g, "positions"), pos, (size_t)n * sizeof *pos, &err), VKG_OK);
    if (vkg_find(g, "pos") != VKG_NONE) assert_int_equal(vkg_session_set_index(s, vkg_find(g, "pos"), start, &err), VKG_OK);
}

/* Compares st against sr; every step within its threshold, the last step's drift within the
 * model's; prints the summary.  Returns how many steps have the given label. */
static int expect_agreement(vkg_session *st, vkg_session *sr, int n, const char *what, const char *count_label) {
    vkg_step_comparison *cmp = NULL;
    int first = 7, counted = 0;
    vkg_error err = {0};
    if (vkg_session_compare(st, sr, &cmp, &first, &err) != VKG_OK) fail_msg("%s: %s", what, err.message);
    int closest = 0, drifted = 0;
    for (int i = 0; i < n; i++) {
        const vkg_step_comparison *c = &cmp[i];
        if (c->fails)
            fail_msg("%s: step %d, %s (node '%s'): nmse %.3e > %.0e on the reference's inputs (drift %.3e)", what, i,
                     c->label, c->node, c->nmse, c->threshold, c->drift_nmse);
        assert_int_equal(c->nonfinite_mismatches + c->drift_nonfinite_mismatches, 0);
        if (c->nmse / c->threshold > cmp[closest].nmse / cmp[closest].threshold) closest = i;
        if (c->drift_nmse > cmp[drifted].drift_nmse) drifted = i;
        counted += !strcmp(c->label, count_label);
    }
    assert_int_equal(first, -1);
    const vkg_step_comparison *last = &cmp[n - 1];
    if (!(last->drift_nmse <= VKG_CONFORMANCE_NMSE_MODEL))
        fail_msg("%s: the free-running logits drift by nmse %.3e > %.0e", what, last->drift_nmse,
                 VKG_CONFORMANCE_NMSE_MODEL);
    fprintf(stderr,
            "  %s: %d steps within their thresholds; closest step %d, %s, nmse %.3e of %.0e; drift largest %.3e "
            "(step %d, %s), logits %.3e\n",
            what, n, closest, cmp[closest].label, cmp[closest].nmse, cmp[closest].threshold, cmp[drifted].drift_nmse,
            drifted, cmp[drifted].label, last->drift_nmse);
    free(cmp);
    return counted;
}

/* The forward pass over 1024 tokens, logits at every position. */
static void test_forward_1024(void **state) {
    (void)state;
    open_model();
    vkg_graph *g = build(T_MAX, 0, VKG_LOGITS_ALL);
    vkg_plan *p = compile_for_both(g);
    vkg_session *st = NULL, *sr = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_session_new(gpu, p, &st, &err), VKG_OK);
    assert_int_equal(vkg_session_new(cpu, p, &sr, &err), VKG_OK);
    set_tokens(st, g, ids, positions, T_MAX, 0);
    set_tokens(sr, g, ids, positions, T_MAX, 0);
    int attention = expect_agreement(st, sr, vkg_plan_step_count(p), "forward, T = 1024", "attention+scale+causal");
    assert_int_equal(attention, 12);
    vkg_session_free(st);
    vkg_session_free(sr);
    vkg_plan_free(p);
    vkg_graph_free(g);
    close_model();
}

/* The prefill of the first 1023 tokens on one device, into the cache s holds. */
static void prefill(vkg_device *d, vkg_plan *pp, const vkg_graph *pg, vkg_session *s) {
    vkg_session *ps = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_session_new_shared(d, pp, s, &ps, &err), VKG_OK);
    set_tokens(ps, pg, ids, positions, T_MAX - 1, 0);
    if (vkg_session_run(ps, &err) != VKG_OK) fail_msg("prefill on %s: %s", vkg_device_name(d), err.message);
    vkg_session_free(ps);
}

/* One decode step at position 1023 over the cache each device's prefill filled. */
static void test_decode_at_1023(void **state) {
    (void)state;
    open_model();
    vkg_graph *g = build(1, T_MAX, VKG_LOGITS_LAST), *pg = build(T_MAX - 1, T_MAX, VKG_LOGITS_LAST);
    vkg_plan *p = compile_for_both(g), *pp = compile_for_both(pg);
    vkg_session *st = NULL, *sr = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_session_new(gpu, p, &st, &err), VKG_OK);
    assert_int_equal(vkg_session_new(cpu, p, &sr, &err), VKG_OK);
    prefill(gpu, pp, pg, st);
    prefill(cpu, pp, pg, sr);
    set_tokens(st, g, ids + T_MAX - 1, positions + T_MAX - 1, 1, T_MAX - 1);
    set_tokens(sr, g, ids + T_MAX - 1, positions + T_MAX - 1, 1, T_MAX - 1);
    int writes = expect_agreement(st, sr, vkg_plan_step_count(p), "decode at 1023", "write_at");
    assert_int_equal(writes, 12);   /* every layer's cache row written and compared */
    vkg_session_free(st);
    vkg_session_free(sr);
    vkg_plan_free(p);
    vkg_plan_free(pp);
    vkg_graph_free(g);
    vkg_graph_free(pg);
    close_model();
}

/* How many steps have a label that starts with prefix. */
static int count_steps(const vkg_plan *p, const char *prefix) {
    int n = 0;
    for (int i = 0; i < p->n_steps; i++) n += !strncmp(p->steps[i].label, prefix, strlen(prefix));
    return n;
}

/* One batched decode step of 8 sequences of the open 2-layer model over caches of `cache`
 * positions: sequence r holds the first N - 1 - r k ids (k the spread `compare --batch 8` takes
 * for a prompt of N), so the rows sit at positions N - 1 down to `last`, each attending to its own
 * slot alone; every step agrees, and each layer has one cache write (`write`: its label, the
 * Llama family's is the rotation's own step) and one attention step for all the rows. */
static void batched_decode_8(int N, int cache, int last, const char *what, const char *write) {
    enum { ROWS = 8 };
    int lengths[ROWS];
    for (int r = 0; r < ROWS; r++) lengths[r] = N - 1 - r * ((N - 2) / (ROWS - 1));
    assert_int_equal(lengths[ROWS - 1], last);
    decode_compare d;
    decode_compare_setup(&d, model, gpu, cpu, ids, lengths, ROWS, cache);
    assert_int_equal(expect_agreement(d.test, d.ref, vkg_plan_step_count(d.plan), what, write), 2);
    assert_int_equal(count_steps(d.plan, "attention"), 2);
    decode_compare_free(&d);
    close_model();
}

/* At GPT-2 124M's shapes: rows at positions 1000 down to 6 of caches of 1024 (the spread of a
 * prompt of 1001). */
static void test_batched_decode_8(void **state) {
    (void)state;
    char *two = test_tmpdir("comparescale-batch");
    assert_non_null(two);
    vkg_random_gpt2_options o;
    vkg_random_gpt2_options_default(&o);
    vkg_error err = {0};
    assert_int_equal(vkg_random_gpt2_size("gpt2", &o, &err), VKG_OK);
    o.n_layer = 2;
    o.seed = 8;
    if (vkg_random_gpt2_write(two, &o, &err) != VKG_OK) fail_msg("%s", err.message);
    open_model_from(two, 0);
    batched_decode_8(1001, T_MAX, 6, "batched decode, 8 rows at 1000 down to 6", "write_at");
    assert_int_equal(test_remove_tree(two), 0);
    free(two);
}

/* SmolLM2-135M's shapes, 2 layers: the forward pass over 2048 tokens, logits at every position. */
static void test_smollm2_forward_2048(void **state) {
    (void)state;
    open_model_from(llama_dir, 0);
    vkg_graph *g = build(T_LLAMA, 0, VKG_LOGITS_ALL);
    vkg_plan *p = compile_for_both(g);
    /* the Llama layer's own steps are there to be judged: 2 norms a layer and the final one, q
     * and k rotated (v copied beside them) in one step a layer, one fused attention a layer */
    assert_int_equal(count_steps(p, "rms_norm"), 5);
    assert_int_equal(count_steps(p, "rope"), 2);
    assert_int_equal(count_steps(p, "attention"), 2);
    vkg_session *st = NULL, *sr = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_session_new(gpu, p, &st, &err), VKG_OK);
    assert_int_equal(vkg_session_new(cpu, p, &sr, &err), VKG_OK);
    set_tokens(st, g, ids, positions, T_LLAMA, 0);
    set_tokens(sr, g, ids, positions, T_LLAMA, 0);
    expect_agreement(st, sr, vkg_plan_step_count(p), "SmolLM2-135M shapes, forward, T = 2048", "rope");
    vkg_session_free(st);
    vkg_session_free(sr);
    vkg_plan_free(p);
    vkg_graph_free(g);
    close_model();
}

/* At SmolLM2-135M's shapes (9 query heads in groups of 3: each row's heads of a group as rows at
 * its one position): rows at positions 2046 down to 2 of caches of 2048. */
static void test_smollm2_batched_decode_8(void **state) {
    (void)state;
    open_model_from(llama_dir, 0);
    batched_decode_8(T_LLAMA - 1, T_LLAMA, 2, "SmolLM2 batched decode, 8 rows at 2046 down to 2", "rope+write");
}

/* At Qwen3-0.6B's shapes, 2 layers (heads of 128, 16 query heads over 8, q and k each through a
 * norm of its own before the rotation: each rotated for every row in a step of its own): rows at
 * positions 2046 down to 2 of caches of 2048. */
static void test_qwen3_batched_decode_8(void **state) {
    (void)state;
    char *qwen3 = random_llama("comparescale-qwen3", "qwen3-0.6b", 6);
    assert_non_null(qwen3);
    open_model_from(qwen3, 0);
    batched_decode_8(T_LLAMA - 1, T_LLAMA, 2, "Qwen3 batched decode, 8 rows at 2046 down to 2", "write_at");
    assert_int_equal(test_remove_tree(qwen3), 0);
    free(qwen3);
}

/* The constant region of the weight named name. */
static int weight_region(const vkg_plan *p, const vkg_graph *g, const char *name) {
    for (int r = 0; r < p->n_regions; r++)
        if (p->regions[r].kind == VKG_REGION_CONSTANT && p->regions[r].tensor != VKG_NONE &&
            !strcmp(vkg_tensor_name(g, p->regions[r].tensor), name))
            return r;
    fail_msg("no constant region holds %s", name);
    return -1;
}

static int step_binds(const vkg_plan *p, int i, int r) {
    for (int k = 0; k < VKG_MAX_BINDINGS; k++)
        if (p->steps[i].bind[k].region == r) return 1;
    return 0;
}

/* Layer 1's q/k/v projection weight scaled by 1.5 on the Vulkan device only (its constants copied there, not
 * read in place from host memory): the one step that reads it fails and is named first; every
 * step before it, and every later step (on the reference's inputs), agrees; the drift carries the
 * damage to the logits.  T = 256: the search is the same at every length. */
static void test_smollm2_corrupted_weight(void **state) {
    (void)state;
    enum { T = 256 };
    open_model_from(llama_dir, 1);
    vkg_graph *g = build(T, 0, VKG_LOGITS_ALL);
    vkg_plan *p = compile_for_both(g);
    const int region = weight_region(p, g, "model.layers.1.self_attn.qkv_proj.weight");
    int reader = -1, readers = 0;
    for (int i = 0; i < p->n_steps; i++)
        if (step_binds(p, i, region)) readers++, reader = reader < 0 ? i : reader;
    assert_int_equal(readers, 1);
    vkg_session *st = NULL, *sr = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_session_new(gpu, p, &st, &err), VKG_OK);
    assert_int_equal(vkg_session_new(cpu, p, &sr, &err), VKG_OK);
    set_tokens(st, g, ids, positions, T, 0);
    set_tokens(sr, g, ids, positions, T, 0);
    const vkg_region *r = &p->regions[region];
    assert_int_equal(r->host_dtype, VKG_F32);
    float *bad = malloc(r->bytes);
    assert_non_null(bad);
    memcpy(bad, r->host, r->bytes);
    for (size_t i = 0; i < r->bytes / sizeof *bad; i++) bad[i] *= 1.5f;
    assert_int_equal(st->device->ops->write(st->impl, region, 0, bad, r->bytes, &err), VKG_OK);
    free(bad);
    vkg_step_comparison *cmp = NULL;
    int first = -1;
    assert_int_equal(vkg_session_compare(st, sr, &cmp, &first, &err), VKG_OK);
    assert_int_equal(first, reader);
    for (int i = 0; i < p->n_steps; i++) {
        if (i == reader) continue;
        if (cmp[i].fails) fail_msg("step %d, %s, fails too (nmse %.3e)", i, cmp[i].label, cmp[i].nmse);
    }
    assert_true(cmp[reader].nmse > 1e-3);
    assert_true(cmp[p->n_steps - 1].drift_nmse > VKG_CONFORMANCE_NMSE_MODEL);
    fprintf(stderr, "  damaged qkv_proj of layer 1: first failing step %d, %s (node '%s'), nmse %.3e; logits drift %.3e\n",
            reader, cmp[reader].label, cmp[reader].node, cmp[reader].nmse, cmp[p->n_steps - 1].drift_nmse);
    free(cmp);
    vkg_session_free(st);
    vkg_session_free(sr);
    vkg_plan_free(p);
    vkg_graph_free(g);
    close_model();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_1024),
        cmocka_unit_test(test_decode_at_1023),
        cmocka_unit_test(test_batched_decode_8),
        cmocka_unit_test(test_smollm2_forward_2048),
        cmocka_unit_test(test_smollm2_batched_decode_8),
        cmocka_unit_test(test_qwen3_batched_decode_8),
        cmocka_unit_test(test_smollm2_corrupted_weight),
    };
    /* one case alone: VKG_SCALE_CASE=test_smollm2* (cmocka's pattern) */
    if (getenv("VKG_SCALE_CASE")) cmocka_set_test_filter(getenv("VKG_SCALE_CASE"));
    return cmocka_run_group_tests(tests, setup, teardown);
}
