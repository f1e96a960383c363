/* Tests of the CPU kernels other than matmul (src/cpu/kernel_*.c; matmul has test_cpu_matmul.c),
 * called directly with hand-built parameter blocks, against values worked out by hand and the
 * naive references in support/cpu_reference; of the thread pool; and of the CPU executor
 * running a small hand-built plan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/backend.h"
#include "cpu/kernels.h"
#include "cpu/threadpool.h"
#include "support/cpu_reference.h"
#include "vkgraph.h"


/* ---- binary and unary ---------------------------------------------------------------------- */

static void test_binary_broadcast(void **state) {
    (void)state;
    /* a [2, 3, 4, 5] contiguous; b [1, 3, 1, 5] broadcast over dims 0 and 2. */
    float a[120], b[15], out[120];
    for (int i = 0; i < 120; i++) a[i] = (float)i;
    for (int i = 0; i < 15; i++) b[i] = (i % 4 == 0) ? 0.0f : (float)(i + 1) / 8.0f;
    vkg_binary_params p = {.shape = {2, 3, 4, 5}, .a_strides = {60, 20, 5, 1}, .b_strides = {0, 5, 0, 1}};
    for (uint32_t op = 0; op < 3; op++) {
        p.op = op;
        vkg_cpu_binary(&p, a, b, out, 0, 60);
        vkg_cpu_binary(&p, a, b, out, 60, 120); /* a split in the middle of a run changes nothing */
        for (int i0 = 0; i0 < 2; i0++)
            for (int i1 = 0; i1 < 3; i1++)
                for (int i2 = 0; i2 < 4; i2++)
                    for (int i3 = 0; i3 < 5; i3++) {
                        int i = ((i0 * 3 + i1) * 4 + i2) * 5 + i3;
                        float x = a[i], y = b[i1 * 5 + i3];
                        float want = op == VKG_BINARY_ADD ? x + y : op == VKG_BINARY_MUL ? x * y
                                                                  : (y != 0 ? x : -INFINITY);
                        assert_true(out[i] == want);
                    }
    }
}

static void test_unary_ops(void **state) {
    (void)state;
    /* copy through strides: out [4, 3] = transpose of in [3, 4], written from offset 2. */
    float in[12], out[14];
    for (int i = 0; i < 12; i++) in[i] = (float)i;
    vkg_unary_params t = {.op = VKG_UNARY_COPY, .dyn_index = VKG_NO_INDEX, .shape = {1, 1, 4, 3},
                          .in_strides = {0, 0, 1, 4}, .out_offset = 2, .out_strides = {0, 0, 3, 1}};
    vkg_cpu_unary(&t, in, out, NULL, 0, 12);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) assert_true(out[2 + i * 3 + j] == in[j * 4 + i]);

    const float x[] = {1, -1, 0, 3, -2.5f};
    float y[5];
    vkg_unary_params u = {.dyn_index = VKG_NO_INDEX, .shape = {1, 1, 1, 5}, .in_strides = {0, 0, 0, 1},
                          .out_strides = {0, 0, 0, 1}};
    u.op = VKG_UNARY_GELU;
    vkg_cpu_unary(&u, x, y, NULL, 0, 5);
    ref_assert_close(y[0], 0.841192, 1e-6);
    ref_assert_close(y[1], -0.158808, 1e-6);
    assert_true(y[2] == 0.0f);
    ref_assert_close(y[3], 2.996363, 1e-5);
    u.op = VKG_UNARY_SCALE, u.alpha = 2.5f;
    vkg_cpu_unary(&u, x, y, NULL, 0, 5);
    for (int i = 0; i < 5; i++) assert_true(y[i] == 2.5f * x[i]);
    u.op = VKG_UNARY_RELU;
    vkg_cpu_unary(&u, x, y, NULL, 0, 5);
    assert_true(y[0] == 1 && y[1] == 0 && y[2] == 0 && y[3] == 3 && y[4] == 0);
    const float odd[] = {NAN, INFINITY, -INFINITY, -0.0f, 1e-30f}; /* relu(NaN) = 0, as maxNum */
    vkg_cpu_unary(&u, odd, y, NULL, 0, 5);
    assert_true(y[0] == 0 && y[1] == INFINITY && y[2] == 0 && y[3] == 0 && y[4] == 1e-30f);
}

/* Every activation through the unary kernel against its formula in double (ref_activation, from
 * libm), far into both tails, and at the limits: +inf gives +inf, -inf gives -0 (0 for relu), NaN
 * stays NaN (relu: 0).  Tolerances are relative: the gate of a sigmoid-gated activation is
 * 1 / (1 + exp(-z)) with z rounded to float, so its error grows with |z| (about 1e-7 |z|); the
 * exact GELU's gate comes from erfc in double and is good to float rounding everywhere. */
static void test_activation_values(void **state) {
    (void)state;
    static const float x[] = {-12.0f, -6.0f, -3.0f, -1.0f, -0.5f, -1e-3f, -1e-30f, 0.0f, 1e-30f, 1e-3f,
                              0.5f, 1.0f, 3.0f, 6.0f, 12.0f, 100.0f};
    enum { N = sizeof x / sizeof x[0] };
    static const struct { uint32_t op; double rel; float x_min; } acts[] = {
        {VKG_UNARY_GELU_ERF, 3e-7, -12.0f}, /* relative even at -12, where the value is -2e-32 */
        {VKG_UNARY_GELU, 4e-6, -6.0f},      /* z = -25 at x = -6 */
        {VKG_UNARY_QUICK_GELU, 2e-6, -6.0f},
        {VKG_UNARY_SILU, 1e-6, -12.0f},
        {VKG_UNARY_RELU, 0.0, -12.0f},
    };
    for (size_t a = 0; a < sizeof acts / sizeof acts[0]; a++) {
        float y[N];
        vkg_unary_params u = {.op = acts[a].op, .dyn_index = VKG_NO_INDEX, .shape = {1, 1, 1, N},
                              .in_strides = {0, 0, 0, 1}, .out_strides = {0, 0, 0, 1}};
        vkg_cpu_unary(&u, x, y, NULL, 0, N);
        for (int i = 0; i < N; i++) {
            if (x[i] < acts[a].x_min) continue;
            double want = ref_activation(acts[a].op, x[i]);
            if (!(fabs(y[i] - want) <= acts[a].rel * fabs(want) + 1e-45))
                fail_msg("activation %u at x = %g: %.9g, want %.9g", acts[a].op, (double)x[i], (double)y[i], want);
        }
        /* the same function is the matmul epilogue's */
        for (int i = 0; i < N; i++) assert_true(y[i] == vkg_cpu_activation(acts[a].op, x[i]));
        const float odd[] = {INFINITY, -INFINITY, NAN, -1e30f, 1e30f};
        vkg_unary_params v = u;
        v.shape[3] = 5;
        vkg_cpu_unary(&v, odd, y, NULL, 0, 5);
        int relu = acts[a].op == VKG_UNARY_RELU;
        assert_true(y[0] == INFINITY);
        assert_true(y[1] == 0.0f && (signbit(y[1]) != 0) == !relu);
        assert_true(relu ? y[2] == 0.0f : isnan(y[2]));
        assert_true(y[3] == 0.0f);
        assert_true(y[4] == 1e30f);
    }
    assert_true(vkg_cpu_is_activation(VKG_UNARY_COPY) && !vkg_cpu_is_activation(VKG_UNARY_SCALE) &&
                !vkg_cpu_is_activation(VKG_UNARY_CAUSAL) && !vkg_cpu_is_activation(VKG_UNARY_LAST + 1));
}

/* Causal: -inf where i3 > i2 + causal_offset + index, over [1, 2, 4, 6] scores. */
static void test_unary_causal_and_dyn_index(void **state) {
    (void)state;
    float s[48], out[48];
    for (int i = 0; i < 48; i++) s[i] = (float)i;
    const int32_t indices[] = {1};
    vkg_unary_params p = {.op = VKG_UNARY_CAUSAL, .causal_offset = 1, .dyn_index = 0,
                          .shape = {1, 2, 4, 6}, .in_strides = {48, 24, 6, 1}, .out_strides = {48, 24, 6, 1}};
    vkg_cpu_unary(&p, s, out, indices, 0, 48);
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 6; j++) {
                int e = h * 24 + i * 6 + j;
                assert_true(j > i + 2 ? out[e] == -INFINITY : out[e] == s[e]);
            }

    /* Writing rows at a runtime position: x [2, 3] into state [5, 3] at row indices[1] = 2. */
    const float x[] = {1, 2, 3, 4, 5, 6};
    const int32_t pos[] = {7, 2};
    float st[15];
    for (int i = 0; i < 15; i++) st[i] = -1;
    vkg_unary_params w = {.op = VKG_UNARY_COPY, .dyn_index = 1, .shape = {1, 1, 2, 3},
                          .in_strides = {0, 0, 3, 1}, .out_strides = {0, 0, 3, 1}, .out_dyn_stride = 3};
    vkg_cpu_unary(&w, x, st, pos, 0, 6);
    for (int i = 0; i < 15; i++) assert_true(st[i] == (i >= 6 && i < 12 ? x[i - 6] : -1));

    /* Each i0 its own position (dyn_rows), as a decode step's rows into their slots: x [2, 3]
     * (rows of one position each) into state [2, 5, 3], row 0 at indices[1] = 2 of its plane,
     * row 1 at indices[2] = 4 of its; run in two parts, the split inside row 1. */
    const int32_t rows_pos[] = {7, 2, 4};
    float planes[30];
    for (int i = 0; i < 30; i++) planes[i] = -1;
    vkg_unary_params wr = {.op = VKG_UNARY_COPY, .dyn_index = 1, .dyn_rows = 1, .shape = {2, 1, 1, 3},
                           .in_strides = {3, 0, 0, 1}, .out_strides = {15, 0, 0, 1}, .out_dyn_stride = 3};
    vkg_cpu_unary(&wr, x, planes, rows_pos, 0, 4);
    vkg_cpu_unary(&wr, x, planes, rows_pos, 4, 6);
    for (int i = 0; i < 30; i++)
        assert_true(planes[i] == (i >= 6 && i < 9 ? x[i - 6] : i >= 27 ? x[i - 24] : -1));
}

/* ---- softmax ------------------------------------------------------------------------------- */

static vkg_softmax_params softmax_plain(uint32_t rows, uint32_t cols) {
    vkg_softmax_params p;
    memset(&p, 0, sizeof p);
    p.rows = rows, p.cols = cols, p.dim1 = 1, p.dim2 = rows, p.scale = 1.0f;
    p.dyn_index = VKG_NO_INDEX;
    return p;
}

static void test_softmax_rows(void **state) {
    (void)state;
    vkg_rng rng;
    vkg_rng_seed(&rng, 1);
    float *x = ref_checked_floats(&rng, 6 * 10, 5), y[60];
    double want[10];
    vkg_softmax_params p = softmax_plain(6, 10);
    vkg_cpu_softmax(&p, x, y, NULL, NULL, 0, 6);
    for (int r = 0; r < 6; r++) {
        double sum = 0;
        ref_softmax_row(x + r * 10, NULL, 10, want);
        for (int j = 0; j < 10; j++) sum += y[r * 10 + j], ref_assert_close(y[r * 10 + j], want[j], 1e-6);
        ref_assert_close(sum, 1.0, 1e-6);
    }
    free(x);

    const float big[] = {1000, 1001}; /* no overflow */
    float w[2];
    p = softmax_plain(1, 2);
    vkg_cpu_softmax(&p, big, w, NULL, NULL, 0, 1);
    ref_assert_close(w[0], 0.268941, 1e-6);
    ref_assert_close(w[1], 0.731059, 1e-6);

    const float pair[] = {0, 2.0f * logf(3.0f)}; /* scale 0.5: exp(0) : exp(ln 3) = 1 : 3 */
    p.scale = 0.5f;
    vkg_cpu_softmax(&p, pair, w, NULL, NULL, 0, 1);
    ref_assert_close(w[0], 0.25, 1e-6);
    ref_assert_close(w[1], 0.75, 1e-6);

    const float with_nan[] = {1, NAN};
    p.scale = 1.0f;
    vkg_cpu_softmax(&p, with_nan, w, NULL, NULL, 0, 1);
    assert_true(isnan(w[0]) && isnan(w[1]));
}

/* Causal over [2 heads, 4 queries, 4 keys]: zeros above the diagonal, each row a softmax of its
 * visible prefix; an offset that hides everything gives zero rows. */
static void test_softmax_causal(void **state) {
    (void)state;
    vkg_rng rng;
    vkg_rng_seed(&rng, 2);
    float *x = ref_checked_floats(&rng, 32, 3), y[32];
    double want[4];
    vkg_softmax_params p = softmax_plain(8, 4);
    p.dim1 = 2, p.dim2 = 4, p.mask_kind = VKG_SOFTMAX_MASK_CAUSAL;
    p.causal_offset = -2, p.dyn_index = 1; /* -2 + indices[1] = 0: the plain diagonal */
    const int32_t indices[] = {5, 2};
    vkg_cpu_softmax(&p, x, y, NULL, indices, 0, 8);
    for (int r = 0; r < 8; r++) {
        int i = r % 4, keep[4];
        for (int j = 0; j < 4; j++) keep[j] = j <= i;
        ref_softmax_row(x + r * 4, keep, 4, want);
        for (int j = 0; j < 4; j++) {
            if (j > i) assert_true(y[r * 4 + j] == 0.0f);
            ref_assert_close(y[r * 4 + j], want[j], 1e-6);
        }
    }
    p.causal_offset = -1, p.dyn_index = VKG_NO_INDEX; /* query 0 sees nothing */
    vkg_cpu_softmax(&p, x, y, NULL, NULL, 0, 8);
    for (int j = 0; j < 4; j++) assert_true(y[j] == 0.0f && y[16 + j] == 0.0f);
    ref_assert_close(y[4] + y[5], 1.0, 1e-6);
    free(x);
}

static void test_softmax_masks(void **state) {
    (void)state;
    const float x[] = {0.5f, 1, -1, 2, 3, 0, 1, 1};
    float y[8];
    double want[4];
    /* bool mask [2 rows, 4]: row 0 keeps 0 and 2, row 1 keeps nothing -> zeros, not NaN. */
    const float keep_mask[] = {1, 0, 1, 0, 0, 0, 0, 0};
    vkg_softmax_params p = softmax_plain(2, 4);
    p.mask_kind = VKG_SOFTMAX_MASK_BOOL, p.mask_strides[2] = 4, p.mask_strides[3] = 1;
    vkg_cpu_softmax(&p, x, y, keep_mask, NULL, 0, 2);
    const int keep[] = {1, 0, 1, 0};
    ref_softmax_row(x, keep, 4, want);
    for (int j = 0; j < 4; j++) ref_assert_close(y[j], want[j], 1e-6);
    assert_true(y[1] == 0.0f && y[3] == 0.0f);
    for (int j = 4; j < 8; j++) assert_true(y[j] == 0.0f);

    /* additive mask [4] broadcast over both rows (stride 0), with a -inf entry. */
    const float add[] = {0, -INFINITY, 0.5f, -1};
    p.mask_kind = VKG_SOFTMAX_MASK_ADDITIVE, p.mask_strides[2] = 0, p.mask_offset = 0;
    vkg_cpu_softmax(&p, x, y, add, NULL, 0, 2);
    for (int r = 0; r < 2; r++) {
        float masked[4];
        for (int j = 0; j < 4; j++) masked[j] = x[r * 4 + j] + add[j];
        ref_softmax_row(masked, NULL, 4, want);
        for (int j = 0; j < 4; j++) ref_assert_close(y[r * 4 + j], want[j], 1e-6);
        assert_true(y[r * 4 + 1] == 0.0f);
    }
}

/* ---- layernorm and embedding --------------------------------------------------------------- */

static void test_layernorm(void **state) {
    (void)state;
    vkg_rng rng;
    vkg_rng_seed(&rng, 4);
    float *x = ref_checked_floats(&rng, 3 * 50, 3), y[150];
    for (int i = 0; i < 150; i++) x[i] += 5.0f; /* a mean far from 0 */
    double want[50];
    vkg_layernorm_params p = {.rows = 3, .cols = 50, .eps = 1e-5f};
    vkg_cpu_layernorm(&p, x, y, NULL, NULL, 0, 3);
    for (int r = 0; r < 3; r++) {
        double mean = 0, var = 0;
        ref_layernorm_row(x + r * 50, 50, 1e-5, want);
        for (int c = 0; c < 50; c++) mean += y[r * 50 + c], ref_assert_close(y[r * 50 + c], want[c], 1e-5);
        mean /= 50;
        for (int c = 0; c < 50; c++) var += (y[r * 50 + c] - mean) * (y[r * 50 + c] - mean);
        ref_assert_close(mean, 0.0, 1e-6);
        ref_assert_close(var / 50, 1.0, 1e-3);
    }
    free(x);

    /* [1, 2, 3, 4]: mean 2.5, var 1.25, in place, gamma and beta read from offset 1. */
    float v[] = {1, 2, 3, 4};
    const float gamma[] = {9, 1, 2, 0.5f, -1}, beta[] = {9, 0, 1, 0, 2};
    p = (vkg_layernorm_params){.rows = 1, .cols = 4, .gamma_offset = 1, .beta_offset = 1,
                               .flags = VKG_LAYERNORM_GAMMA | VKG_LAYERNORM_BETA};
    vkg_cpu_layernorm(&p, v, v, gamma, beta, 0, 1);
    const double expect[] = {-1.341641, 0.105573, 0.223607, 0.658359};
    for (int c = 0; c < 4; c++) ref_assert_close(v[c], expect[c], 1e-5);
}

static void test_embedding(void **state) {
    (void)state;
    float table[15]; /* vocab 5, dim 3: row r is [10r, 10r+1, 10r+2] */
    for (int r = 0; r < 5; r++)
        for (int c = 0; c < 3; c++) table[r * 3 + c] = (float)(10 * r + c);
    const int32_t ids[] = {0, 4, 2, -1, 7, 3};
    float out[18];
    for (int i = 0; i < 18; i++) out[i] = 99;

    /* Rows [0, 3) with zero_invalid, then rows [3, 5) from the table's second part. */
    vkg_embedding_params lo = {.n_ids = 6, .dim = 3, .vocab = 5, .row_begin = 0, .row_count = 3,
                               .zero_invalid = 1};
    vkg_cpu_embedding(&lo, ids, table, out, 0, 6);
    const float after_lo[] = {0, 1, 2, 99, 99, 99, 20, 21, 22, 0, 0, 0, 0, 0, 0, 99, 99, 99};
    assert_memory_equal(out, after_lo, sizeof out);
    vkg_embedding_params hi = {.n_ids = 6, .dim = 3, .vocab = 5, .table_offset = 9, .row_begin = 3,
                               .row_count = 2};
    vkg_cpu_embedding(&hi, ids, table, out, 0, 6);
    const float all[] = {0, 1, 2, 40, 41, 42, 20, 21, 22, 0, 0, 0, 0, 0, 0, 30, 31, 32};
    assert_memory_equal(out, all, sizeof out);
}

/* ---- thread pool --------------------------------------------------------------------------- */

static void count_range(void *ctx, size_t begin, size_t end) {
    int *count = ctx;
    for (size_t i = begin; i < end; i++) count[i]++;
}

static void test_threadpool_covers_each_index_once(void **state) {
    (void)state;
    static const size_t sizes[] = {0, 1, 2, 3, 5, 1000};
    int count[1000];
    for (int threads = 1; threads <= 4; threads++) {
        vkg_threadpool *pool = vkg_threadpool_new(threads);
        assert_non_null(pool);
        assert_int_equal(vkg_threadpool_threads(pool), threads);
        for (size_t s = 0; s < 6; s++)
            for (int rep = 0; rep < 3; rep++) {
                memset(count, 0, sizeof count);
                vkg_threadpool_for(pool, sizes[s], count_range, count);
                for (size_t i = 0; i < 1000; i++) assert_int_equal(count[i], i < sizes[s] ? 1 : 0);
            }
        vkg_threadpool_free(pool);
    }
    assert_null(vkg_threadpool_new(0));
}

/* Index 0 waits until the other indices done number more than the other threads' equal shares
 * of [0, n) (or 10 s pass): they can only get there by taking pieces the waiting thread would
 * otherwise run, as they must when the OS holds a thread up. */
typedef struct held_job {
    size_t n;
    int threads;
    atomic_size_t done;
    int others_took_over;
} held_job;

static void hold_index_0(void *ctx, size_t begin, size_t end) {
    held_job *h = ctx;
    for (size_t i = begin; i < end; i++) {
        if (i != 0) {
            atomic_fetch_add(&h->done, 1);
            continue;
        }
        const size_t beyond_shares = h->n - h->n / (size_t)h->threads + 1;
        const double give_up = vkg_clock_seconds() + 10.0;
        while (atomic_load(&h->done) < beyond_shares && vkg_clock_seconds() < give_up) sched_yield();
        h->others_took_over = atomic_load(&h->done) >= beyond_shares;
    }
}

static void test_threadpool_others_take_a_held_threads_share(void **state) {
    (void)state;
    for (int threads = 2; threads <= 3; threads++) {
        vkg_threadpool *pool = vkg_threadpool_new(threads);
        assert_non_null(pool);
        held_job h = {.n = 96, .threads = threads};
        atomic_init(&h.done, 0);
        vkg_threadpool_for(pool, h.n, hold_index_0, &h);
        assert_true(h.others_took_over);
        assert_int_equal(atomic_load(&h.done), h.n - 1);
        vkg_threadpool_free(pool);
    }
}

/* ---- the executor -------------------------------------------------------------------------- */

/* Two steps: arena = x [4, 8] @ W [8, 4]; y = causal softmax(arena) whose offset is the runtime
 * index.  Regions: 0 arena, 1 input x, 2 constant W, 3 output y, 4 the runtime indices. */
typedef struct tiny_plan {
    vkg_region regions[5];
    vkg_step steps[2];
    vkg_plan plan;
} tiny_plan;

static void bind(vkg_step *s, int slot, int32_t region, uint64_t offset, uint64_t bytes, int writes) {
    s->bind[slot] = (vkg_binding){region, offset, bytes, writes};
}

static void tiny_plan_init(tiny_plan *t, const float *W) {
    memset(t, 0, sizeof *t);
    t->regions[0] = (vkg_region){VKG_REGION_ARENA, VKG_NONE, 256, NULL, VKG_F32, VKG_F32};
    t->regions[1] = (vkg_region){VKG_REGION_INPUT, 1, 128, NULL, VKG_F32, VKG_F32};
    t->regions[2] = (vkg_region){VKG_REGION_CONSTANT, 2, 128, W, VKG_F32, VKG_F32};
    t->regions[3] = (vkg_region){VKG_REGION_OUTPUT, 3, 64, NULL, VKG_F32, VKG_F32};
    t->regions[4] = (vkg_region){VKG_REGION_INDICES, VKG_NONE, 4, NULL, VKG_I32, VKG_I32};
    for (int i = 0; i < 2; i++)
        for (int slot = 0; slot < VKG_MAX_BINDINGS; slot++) bind(&t->steps[i], slot, -1, 0, 0, 0);
    vkg_step *mm = &t->steps[0], *sm = &t->steps[1];
    mm->kernel = VKG_KERNEL_MATMUL;
    strcpy(mm->label, "matmul");
    bind(mm, 0, 1, 0, 128, 0), bind(mm, 1, 2, 0, 128, 0), bind(mm, 2, 0, 0, 64, 1);
    mm->params.matmul = ref_matmul_params(4, 4, 8);
    sm->kernel = VKG_KERNEL_SOFTMAX;
    strcpy(sm->label, "softmax+causal");
    bind(sm, 0, 0, 0, 64, 0), bind(sm, 1, 3, 0, 64, 1), bind(sm, 3, 4, 0, 4, 0);
    sm->params.softmax = softmax_plain(4, 4);
    sm->params.softmax.mask_kind = VKG_SOFTMAX_MASK_CAUSAL, sm->params.softmax.dyn_index = 0;
    t->plan.regions = t->regions, t->plan.n_regions = 5;
    t->plan.steps = t->steps, t->plan.n_steps = 2;
}

static void open_cpu(struct vkg_device *d, int threads) {
    vkg_error err;
    memset(d, 0, sizeof *d);
    d->opts.cpu_threads = threads;
    assert_int_equal(vkg_cpu_device_open(d, &err), VKG_OK);
}

static void test_executor_runs_a_plan(void **state) {
    (void)state;
    vkg_rng rng;
    vkg_rng_seed(&rng, 6);
    float *x = ref_checked_floats(&rng, 32, 1), *W = ref_checked_floats(&rng, 32, 1);
    tiny_plan t;
    tiny_plan_init(&t, W);
    struct vkg_device d;
    open_cpu(&d, 3);
    char name[64];
    snprintf(name, sizeof name, "CPU (3 threads, %s)", vkg_cpu_isa()); /* the kernels' instruction set */
    assert_string_equal(d.name, name);
    assert_string_equal(d.ops->name, "cpu");

    vkg_error err;
    void *s = NULL;
    assert_int_equal(d.ops->session_new(d.impl, &t.plan, NULL, NULL, &s, &err), VKG_OK);
    const int32_t index = -1; /* query i sees keys j <= i - 1: row 0 is all zeros */
    assert_int_equal(d.ops->write(s, 1, 0, x, 128, &err), VKG_OK);
    assert_int_equal(d.ops->write(s, 4, 0, &index, 4, &err), VKG_OK);
    uint64_t begin[2] = {0, 0}, end[2] = {0, 0};
    vkg_step_times times = {.begin_ns = begin, .end_ns = end};
    const uint64_t before = vkg_clock_ns();
    assert_int_equal(d.ops->run(s, &times, &err), VKG_OK);
    /* each step timed by the host clock, one after the other */
    assert_true(before <= begin[0] && begin[0] <= end[0] && end[0] <= begin[1] && begin[1] <= end[1]);
    assert_true(end[1] <= vkg_clock_ns());
    assert_non_null(times.clock);
    float y[16], scores[16], want[16];
    assert_int_equal(d.ops->read(s, 3, 0, y, sizeof y, &err), VKG_OK);

    ref_run_matmul_kernel(NULL, vkg_cpu_matmul_best_variant(), &t.steps[0].params.matmul, x, W, scores, NULL, NULL);
    vkg_cpu_softmax(&t.steps[1].params.softmax, scores, want, NULL, &index, 0, 4);
    assert_memory_equal(y, want, sizeof y);
    for (int j = 0; j < 4; j++) assert_true(y[j] == 0.0f);
    ref_assert_close(y[4], 1.0, 1e-6);

    /* Zeroing, and the refusals: a constant is never written, ranges are checked. */
    assert_int_equal(d.ops->read(s, 3, 0, NULL, 64, &err), VKG_OK);
    assert_int_equal(d.ops->read(s, 3, 0, y, sizeof y, &err), VKG_OK);
    for (int i = 0; i < 16; i++) assert_true(y[i] == 0.0f);
    assert_int_equal(d.ops->write(s, 2, 0, x, 4, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_int_equal(d.ops->read(s, 3, 32, y, 64, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_int_equal(d.ops->write(s, 7, 0, x, 4, &err), VKG_ERR_INVALID_ARGUMENT);
    d.ops->session_free(s);
    d.ops->device_free(d.impl);
    free(x), free(W);
}

static void expect_rejected(const vkg_plan *p, const char *fragment) {
    struct vkg_device d;
    open_cpu(&d, 2);
    vkg_error err = {VKG_OK, ""};
    void *s = NULL;
    assert_int_equal(d.ops->session_new(d.impl, p, NULL, NULL, &s, &err), VKG_ERR_INVALID_ARGUMENT);
    assert_null(s);
    assert_non_null(strstr(err.message, fragment));
    d.ops->device_free(d.impl);
}

static void test_executor_rejects_bad_plans(void **state) {
    (void)state;
    float W[32] = {0};
    tiny_plan t;
    tiny_plan_init(&t, W), t.steps[0].bind[1].bytes = 256; /* past the end of W's region */
    expect_rejected(&t.plan, "which holds 128 bytes");
    tiny_plan_init(&t, W), t.steps[0].params.matmul.M = 5; /* more rows than x binds */
    expect_rejected(&t.plan, "binding 0 (A)");
    tiny_plan_init(&t, W), t.steps[0].params.matmul.flags = VKG_MATMUL_BIAS;
    expect_rejected(&t.plan, "the slot is empty");
    tiny_plan_init(&t, W), bind(&t.steps[1], 1, 2, 0, 64, 1);
    expect_rejected(&t.plan, "a constant");
    tiny_plan_init(&t, W), t.steps[1].params.softmax.dim2 = 0;
    expect_rejected(&t.plan, "dim2");
    tiny_plan_init(&t, W), t.steps[1].kernel = (vkg_kernel)99;
    expect_rejected(&t.plan, "unknown kernel");
    tiny_plan_init(&t, W), t.steps[1].bind[3].region = 9;
    expect_rejected(&t.plan, "names region 9");

    /* A runtime index that moves a write past its state: x [2, 3] into state [5, 3] at a row. */
    vkg_region regions[3] = {{VKG_REGION_INPUT, 0, 24, NULL, VKG_F32, VKG_F32}, {VKG_REGION_STATE, 1, 60, NULL, VKG_F32, VKG_F32},
                             {VKG_REGION_INDICES, VKG_NONE, 4, NULL, VKG_I32, VKG_I32}};
    vkg_step write_at;
    memset(&write_at, 0, sizeof write_at);
    write_at.kernel = VKG_KERNEL_UNARY;
    bind(&write_at, 0, 0, 0, 24, 0), bind(&write_at, 1, 1, 0, 60, 1), bind(&write_at, 2, 2, 0, 4, 0);
    bind(&write_at, 3, -1, 0, 0, 0), bind(&write_at, 4, -1, 0, 0, 0);
    write_at.params.unary = (vkg_unary_params){.op = VKG_UNARY_COPY, .dyn_index = 0, .shape = {1, 1, 2, 3},
                                               .in_strides = {0, 0, 3, 1}, .out_strides = {0, 0, 3, 1},
                                               .out_dyn_stride = 3};
    vkg_plan p;
    memset(&p, 0, sizeof p);
    p.regions = regions, p.n_regions = 3, p.steps = &write_at, p.n_steps = 1;
    struct vkg_device d;
    open_cpu(&d, 1);
    vkg_error err;
    void *s = NULL;
    assert_int_equal(d.ops->session_new(d.impl, &p, NULL, NULL, &s, &err), VKG_OK);
    static const int32_t rows[] = {3, 4, -1};
    static const vkg_status expect[] = {VKG_OK, VKG_ERR_INVALID_ARGUMENT, VKG_ERR_INVALID_ARGUMENT};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(d.ops->write(s, 2, 0, &rows[i], 4, &err), VKG_OK);
        assert_int_equal(d.ops->run(s, NULL, &err), expect[i]);
    }
    assert_non_null(strstr(err.message, "runtime index -1"));
    d.ops->session_free(s);

    /* With an index for each i0 (dyn_rows) each is checked: rows x [2, 3] into state [5, 3], row
     * 0 at indices[0], row 1 at indices[1], the same plane. */
    regions[2].bytes = 8;
    write_at.params.unary = (vkg_unary_params){.op = VKG_UNARY_COPY, .dyn_index = 0, .dyn_rows = 1,
                                               .shape = {2, 1, 1, 3}, .in_strides = {3, 0, 0, 1},
                                               .out_strides = {0, 0, 0, 1}, .out_dyn_stride = 3};
    bind(&write_at, 2, 2, 0, 8, 0);
    assert_int_equal(d.ops->session_new(d.impl, &p, NULL, NULL, &s, &err), VKG_OK);
    static const int32_t pairs[][2] = {{0, 4}, {4, 5}, {-1, 0}};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(d.ops->write(s, 2, 0, pairs[i], 8, &err), VKG_OK);
        assert_int_equal(d.ops->run(s, NULL, &err), expect[i]);
    }
    assert_non_null(strstr(err.message, "runtime index -1"));
    d.ops->session_free(s);
    /* and only a copy takes them */
    write_at.params.unary.op = VKG_UNARY_SCALE;
    assert_int_not_equal(d.ops->session_new(d.impl, &p, NULL, NULL, &s, &err), VKG_OK);
    assert_non_null(strstr(err.message, "dyn_rows"));
    d.ops->device_free(d.impl);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_binary_broadcast),
        cmocka_unit_test(test_unary_ops),
        cmocka_unit_test(test_activation_values),
        cmocka_unit_test(test_unary_causal_and_dyn_index),
        cmocka_unit_test(test_softmax_rows),
        cmocka_unit_test(test_softmax_causal),
        cmocka_unit_test(test_softmax_masks),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_embedding),
        cmocka_unit_test(test_threadpool_covers_each_index_once),
        cmocka_unit_test(test_threadpool_others_take_a_held_threads_share),
        cmocka_unit_test(test_executor_runs_a_plan),
        cmocka_unit_test(test_executor_rejects_bad_plans),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
