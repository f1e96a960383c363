/* vkg_session_compare: one plan run step by step on two devices, each step on the reference's
 * inputs, the free-running drift beside it.  Equal devices agree on every step; a weight
 * corrupted on one device is found at the first step that reads it and at no step that does not
 * read it, while the drift carries it on; a difference in what the device under test was given
 * is shown as drift and blamed on no step.  A batched decode step of several sequences (a batch
 * context's plan, as `vkgraph compare --decode --batch` sets it up) agrees between Vulkan and the
 * CPU on tiny GPT-2 and Llama models, its rows reading the caches their own prefills filled. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "runtime/session.h"
#include "vkgraph_lesson.h"
#include "support/decode_compare.h"
#include "support/test_util.h"
#include "support/vk_test.h"
#include "vkgraph.h"
#include "vkgraph_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Constants copied to the device, not read in place from host memory (lavapipe would import
 * them), so that a test can corrupt the device's copy alone. */
static const vkg_device_options copied_constants = {.no_host_import = 1};

typedef struct block_case {
    vkg_block_config cfg;
    vkg_block_weights w;
    vkg_graph *g;
    vkg_tensor x;
    float input[2 * 10 * 64];
    vkg_plan *plan;
} block_case;

static void block_case_init(block_case *b, vkg_device *test, vkg_device *ref) {
    memset(b, 0, sizeof *b);
    b->cfg = (vkg_block_config){.d_model = 64, .n_heads = 4, .d_ff = 256, .causal = 1};
    vkg_error err = {0};
    assert_int_equal(vkg_block_weights_init(&b->w, &b->cfg, 7, &err), VKG_OK);
    b->g = vkg_graph_new();
    b->x = vkg_input(b->g, "x", VKG_F32, 3, (int64_t[]){2, 10, 64});
    vkg_output(b->g, "y", vkg_block_build(b->g, b->x, &b->cfg, &b->w, "block", NULL));
    assert_int_equal(vkg_graph_status(b->g), VKG_OK);
    vkg_rng rng;
    vkg_rng_seed(&rng, 3);
    vkg_rng_fill_normal(&rng, b->input, sizeof b->input / sizeof b->input[0], 1.0f);
    vkg_compile_options o;
    vkg_compile_options_default(&o);
    vkg_device_compile_options(test, &o);
    vkg_device_compile_options(ref, &o);
    assert_int_equal(vkg_plan_compile(b->g, &o, &b->plan, &err), VKG_OK);
}

static vkg_session *block_session(block_case *b, vkg_device *d) {
    vkg_session *s = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_session_new(d, b->plan, &s, &err), VKG_OK);
    assert_int_equal(vkg_session_set_input(s, b->x, b->input, sizeof b->input, &err), VKG_OK);
    return s;
}

static void block_case_free(block_case *b) {
    vkg_plan_free(b->plan);
    vkg_graph_free(b->g);
    vkg_block_weights_free(&b->w);
}

/* Two sessions of one plan; every step within its threshold; the outputs after the comparison
 * equal those of an ordinary run. */
static void agree(vkg_device *test, vkg_device *ref, int bit_identical) {
    block_case b;
    block_case_init(&b, test, ref);
    vkg_session *st = block_session(&b, test), *sr = block_session(&b, ref);
    vkg_step_comparison *cmp = NULL;
    int first = 7;
    vkg_error err = {0};
    assert_int_equal(vkg_session_compare(st, sr, &cmp, &first, &err), VKG_OK);
    assert_int_equal(first, -1);
    int n = vkg_plan_step_count(b.plan);
    assert_true(n > 5);
    for (int i = 0; i < n; i++) {
        assert_int_equal(cmp[i].step, i);
        assert_false(cmp[i].fails);
        assert_true(cmp[i].elements > 0);
        assert_true(cmp[i].nmse <= cmp[i].threshold);
        assert_true(cmp[i].drift_nmse >= 0.0 && cmp[i].drift_nmse < 1e-9);
        assert_int_equal(cmp[i].drift_nonfinite_mismatches, 0);
        if (bit_identical)
            assert_true(cmp[i].nmse == 0.0 && cmp[i].max_abs_diff == 0.0 && cmp[i].drift_nmse == 0.0 &&
                        cmp[i].drift_max_abs_diff == 0.0);
        /* a copy on the reference's inputs moves the same bytes */
        if (!strcmp(cmp[i].label, "copy(view)")) assert_true(cmp[i].nmse == 0.0);
    }
    assert_string_equal(cmp[n - 1].label, b.plan->steps[n - 1].label);
    /* matmul steps carry the reduction threshold, fused attention its own, the others the
     * element-wise one */
    for (int i = 0; i < n; i++) {
        vkg_kernel k = b.plan->steps[i].kernel;
        assert_true(cmp[i].threshold == (k == VKG_KERNEL_MATMUL ? 5e-4 : k == VKG_KERNEL_ATTENTION ? 1e-6 : 1e-7));
    }
    float after[2 * 10 * 64], fresh[2 * 10 * 64];
    assert_int_equal(vkg_session_get_output(st, vkg_find(b.g, "y"), after, sizeof after, &err), VKG_OK);
    assert_int_equal(vkg_session_run(sr, &err), VKG_OK);
    assert_int_equal(vkg_session_get_output(sr, vkg_find(b.g, "y"), fresh, sizeof fresh, &err), VKG_OK);
    for (size_t i = 0; i < sizeof after / sizeof after[0]; i++) assert_true(fabsf(after[i] - fresh[i]) < 1e-4f);
    free(cmp);
    vkg_session_free(st);
    vkg_session_free(sr);
    block_case_free(&b);
}

static void test_vulkan_agrees_with_cpu(void **state) {
    (void)state;
    vkg_device *vk = vk_test_open_with(copied_constants), *cpu = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_device_open("cpu", NULL, &cpu, &err), VKG_OK);
    agree(vk, cpu, 0);
    vkg_device_free(cpu);
    vk_test_close(vk);
}

/* The CPU executor with one thread and with two. */
static void open_cpu_pair(vkg_device **one, vkg_device **two) {
    vkg_error err = {0};
    vkg_device_options o1 = {.cpu_threads = 1}, o2 = {.cpu_threads = 2};
    assert_int_equal(vkg_device_open("cpu", &o1, one, &err), VKG_OK);
    assert_int_equal(vkg_device_open("cpu", &o2, two, &err), VKG_OK);
}

static void test_cpu_threads_bit_identical(void **state) {
    (void)state;
    vkg_device *one = NULL, *two = NULL;
    open_cpu_pair(&one, &two);
    agree(two, one, 1);
    vkg_device_free(one);
    vkg_device_free(two);
}

/* Whether step i binds region r. */
static int step_binds(const vkg_plan *p, int i, int r) {
    for (int k = 0; k < VKG_MAX_BINDINGS; k++)
        if (p->steps[i].bind[k].region == r) return 1;
    return 0;
}

/* The weight of the block's first or last matmul, scaled on the Vulkan device only (the CPU executor uses
 * constants in place, read-only): every step before the first that reads it agrees as before,
 * that step fails, and the worst element lies inside its output; every later step that does not
 * read it agrees again (its inputs are the reference's), while the drift carries the damage on
 * to the last step. */
static void corrupt_on(vkg_device *test, vkg_device *ref, int first_matmul) {
    block_case b;
    block_case_init(&b, test, ref);
    const vkg_plan *p = b.plan;
    int mm = -1;
    for (int i = 0; i < p->n_steps; i++)
        if (p->steps[i].kernel == VKG_KERNEL_MATMUL && (mm < 0 || !first_matmul)) mm = i;
    assert_true(mm > 0);
    int region = p->steps[mm].bind[1].region;
    assert_int_equal(p->regions[region].kind, VKG_REGION_CONSTANT);
    int first_reader = -1;
    for (int i = 0; i < p->n_steps && first_reader < 0; i++)
        if (step_binds(p, i, region)) first_reader = i;
    vkg_session *st = block_session(&b, test), *sr = block_session(&b, ref);
    size_t bytes = p->regions[region].bytes;
    float *bad = malloc(bytes);
    assert_non_null(bad);
    memcpy(bad, p->regions[region].host, bytes);
    for (size_t i = 0; i < bytes / 4; i++) bad[i] *= 1.5f;
    vkg_error err = {0};
    assert_int_equal(st->device->ops->write(st->impl, region, 0, bad, bytes, &err), VKG_OK);
    vkg_step_comparison *cmp = NULL;
    int first = -1;
    assert_int_equal(vkg_session_compare(st, sr, &cmp, &first, &err), VKG_OK);
    assert_int_equal(first, first_reader);
    for (int i = 0; i < first; i++) {
        assert_false(cmp[i].fails);
        assert_true(cmp[i].drift_nmse < 1e-9);
    }
    assert_true(cmp[first].fails);
    assert_true(cmp[first].nmse > 1e-3);
    assert_true(cmp[first].drift_nmse > 1e-3);
    int later = 0;
    for (int i = first + 1; i < p->n_steps; i++) {
        assert_int_equal(cmp[i].fails, step_binds(p, i, region));
        assert_true(cmp[i].drift_nmse > 1e-5);   /* the free-running copy read the damage */
        later += !step_binds(p, i, region);
    }
    assert_true(first_matmul ? later >= 5 : first == p->n_steps - 1);
    const vkg_step_comparison *c = &cmp[first];
    assert_int_equal(c->worst_ndim, c->ndim);
    for (int d = 0; d < c->ndim; d++) assert_true(c->worst[d] >= 0 && c->worst[d] < c->shape[d]);
    assert_true(fabsf(c->worst_value - c->worst_reference) > 0.0f);
    free(bad);
    free(cmp);
    vkg_session_free(st);
    vkg_session_free(sr);
    block_case_free(&b);
}

static void test_corrupted_weight_found_on_vulkan(void **state) {
    (void)state;
    vkg_device *vk = vk_test_open_with(copied_constants), *cpu = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_device_open("cpu", NULL, &cpu, &err), VKG_OK);
    corrupt_on(vk, cpu, 0);
    corrupt_on(vk, cpu, 1);
    vkg_device_free(cpu);
    vk_test_close(vk);
}

/* The device under test given another input than the reference: no step is blamed, since each
 * runs on the reference's inputs (on one executor: exactly), and the drift shows the difference
 * from the first step to the last. */
static void test_input_difference_is_drift(void **state) {
    (void)state;
    vkg_device *one = NULL, *two = NULL;
    vkg_error err = {0};
    open_cpu_pair(&one, &two);
    block_case b;
    block_case_init(&b, two, one);
    vkg_session *st = block_session(&b, two), *sr = block_session(&b, one);
    float other[sizeof b.input / sizeof b.input[0]];
    memcpy(other, b.input, sizeof other);
    other[5] += 0.5f;
    assert_int_equal(vkg_session_set_input(st, b.x, other, sizeof other, &err), VKG_OK);
    vkg_step_comparison *cmp = NULL;
    int first = 7;
    assert_int_equal(vkg_session_compare(st, sr, &cmp, &first, &err), VKG_OK);
    assert_int_equal(first, -1);
    int n = vkg_plan_step_count(b.plan);
    for (int i = 0; i < n; i++) {
        assert_false(cmp[i].fails);
        assert_true(cmp[i].nmse == 0.0);
        assert_true(cmp[i].drift_nmse > 0.0);
    }
    assert_true(cmp[0].drift_nmse > 1e-4);   /* one row of 20 normalised from another value */
    free(cmp);
    vkg_session_free(st);
    vkg_session_free(sr);
    block_case_free(&b);
    vkg_device_free(one);
    vkg_device_free(two);
}

static void test_needs_one_plan(void **state) {
    (void)state;
    vkg_device *cpu = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_device_open("cpu", NULL, &cpu, &err), VKG_OK);
    block_case a, b;
    block_case_init(&a, cpu, cpu);
    block_case_init(&b, cpu, cpu);
    vkg_session *sa = block_session(&a, cpu), *sb = block_session(&b, cpu);
    vkg_step_comparison *cmp = (vkg_step_comparison *)&err;   /* must come back NULL */
    int first = 3;
    assert_int_equal(vkg_session_compare(sa, sb, &cmp, &first, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "same plan"));
    assert_null(cmp);
    assert_int_equal(first, -1);
    assert_int_equal(vkg_session_compare(sa, NULL, &cmp, &first, &err), VKG_ERR_INVALID_ARGUMENT);
    vkg_session_free(sa);
    vkg_session_free(sb);
    block_case_free(&a);
    block_case_free(&b);
    vkg_device_free(cpu);
}

/* ---- a batched decode step ------------------------------------------------------------------- */

enum { ROWS = 3, N_IDS = 12 };

/* A tiny random model written to a fresh folder: GPT-2 (2 layers, 4 heads, 32 wide, 64 tokens)
 * or llama-tiny (2 layers, 4 query heads over 2 key/value heads, rotary positions). */
static char *write_tiny(int llama) {
    char *dir = test_tmpdir(llama ? "compare-llama" : "compare-gpt2");
    assert_non_null(dir);
    vkg_error err = {0};
    vkg_status st;
    if (llama) {
        vkg_random_model_options o;
        vkg_random_model_options_default(&o);
        o.seed = 11;
        st = vkg_random_model_write(dir, &o, &err);
    } else {
        vkg_random_gpt2_options o;
        vkg_random_gpt2_options_default(&o);
        o.seed = 11;
        st = vkg_random_gpt2_write(dir, &o, &err);
    }
    if (st != VKG_OK) fail_msg("%s", err.message);
    return dir;
}

/* The last position's logits of the forward pass over the first n ids, on d. */
static void forward_logits(vkg_model *m, vkg_device *d, const int32_t *ids, int n, float *out, size_t V) {
    vkg_model_graph_options o;
    vkg_model_graph_options_default(&o, n);
    vkg_graph *g = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_model_build_graph(m, &o, &g, &err), VKG_OK);
    vkg_plan *p = NULL;
    vkg_session *s = test_session_for(d, g, &p);
    int32_t positions[N_IDS];
    for (int i = 0; i < n; i++) positions[i] = i;
    assert_int_equal(vkg_session_set_input(s, vkg_find(g, "ids"), ids, (size_t)n * sizeof *ids, &err), VKG_OK);
    assert_int_equal(vkg_session_set_input(s, vkg_find(g, "positions"), positions, (size_t)n * sizeof *positions, &err),
                     VKG_OK);
    assert_int_equal(vkg_session_run(s, &err), VKG_OK);
    assert_int_equal(vkg_session_get_output(s, vkg_find(g, "logits"), out, V * sizeof *out, &err), VKG_OK);
    vkg_session_free(s);
    vkg_plan_free(p);
    vkg_graph_free(g);
}

/* Sequences of 11, 6 and 1 ids (rows at positions 11, 6 and 1, each over its own slot's cache):
 * every step within its threshold, every row's keys and values written in one step a layer (the
 * Llama family's by the step that rotates them, "rope+write", GPT-2's by a copy); and the reference's
 * logits of row r are those of the forward pass over the first 12 - 5r ids, so each row read the
 * cache its own prefill filled (an empty or another slot's cache would give others). */
static void batched_decode(int llama) {
    char *dir = write_tiny(llama);
    vkg_device *vk = vk_test_open(), *cpu = test_open_cpu();
    assert_non_null(cpu);
    vkg_model_options mo = {.no_tokenizer = 1};
    vkg_model *m = NULL;
    vkg_error err = {0};
    assert_int_equal(vkg_model_open(dir, vk, &mo, &m, &err), VKG_OK);
    vkg_model_info info;
    assert_int_equal(vkg_model_get_info(m, &info, &err), VKG_OK);
    const size_t V = (size_t)info.n_vocab;
    int32_t ids[N_IDS];
    for (int i = 0; i < N_IDS; i++) ids[i] = (int32_t)((i * 37 + 5) % (int)V);
    const int lengths[ROWS] = {11, 6, 1};
    decode_compare d;
    decode_compare_setup(&d, m, vk, cpu, ids, lengths, ROWS, N_IDS);
    vkg_step_comparison *cmp = NULL;
    int first = 7;
    assert_int_equal(vkg_session_compare(d.test, d.ref, &cmp, &first, &err), VKG_OK);
    assert_int_equal(first, -1);
    const int n = vkg_plan_step_count(d.plan);
    int writes = 0, attention = 0;
    for (int i = 0; i < n; i++) {
        if (cmp[i].fails) fail_msg("step %d, %s: nmse %.3e > %.0e", i, cmp[i].label, cmp[i].nmse, cmp[i].threshold);
        assert_true(cmp[i].drift_nmse < 1e-9);
        writes += !strcmp(cmp[i].label, llama ? "rope+write" : "write_at");
        if (llama) assert_string_not_equal(cmp[i].label, "write_at");
        attention += !strncmp(cmp[i].label, "attention", strlen("attention"));
    }
    assert_int_equal(writes, info.n_layer);
    /* one attention step a layer for every row, grouped queries (the Llama family) too */
    assert_int_equal(attention, info.n_layer);
    assert_int_equal(cmp[n - 1].shape[0], ROWS);   /* the logits of every row */
    float *rows = malloc(ROWS * V * sizeof *rows), *want = malloc(V * sizeof *want);
    assert_true(rows && want);
    assert_int_equal(vkg_session_get_output(d.ref, vkg_find(d.graph, "logits"), rows, ROWS * V * sizeof *rows, &err),
                     VKG_OK);
    for (int r = 0; r < ROWS; r++) {
        forward_logits(m, cpu, ids, lengths[r] + 1, want, V);
        const double diff = test_max_abs_diff(rows + (size_t)r * V, want, V);
        if (!(diff < 1e-4)) fail_msg("row %d: logits differ from the forward pass's by %.3g", r, diff);
    }
    free(rows);
    free(want);
    free(cmp);
    decode_compare_free(&d);
    vkg_model_free(m);
    vkg_device_free(cpu);
    vk_test_close(vk);
    assert_int_equal(test_remove_tree(dir), 0);
    free(dir);
}

static void test_batched_decode_gpt2(void **state) {
    (void)state;
    batched_decode(0);
}

static void test_batched_decode_llama(void **state) {
    (void)state;
    batched_decode(1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vulkan_agrees_with_cpu),
        cmocka_unit_test(test_cpu_threads_bit_identical),
        cmocka_unit_test(test_corrupted_weight_found_on_vulkan),
        cmocka_unit_test(test_input_difference_is_drift),
        cmocka_unit_test(test_needs_one_plan),
        cmocka_unit_test(test_batched_decode_gpt2),
        cmocka_unit_test(test_batched_decode_llama),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
