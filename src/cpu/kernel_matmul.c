/* matmul on the CPU:
 *   C[b, m, n] = sum_k A[b, m, k] * B[b, k, n]   (+ bias[n])  (activation)  (+ R[b, m, n])
 * b a batch entry (b0, b1) of batch0 x batch1; M rows, N columns, K the reduction.  A and B are
 * read through strides (transposes and broadcast batches cost nothing); B's elements are f32,
 * f16 or bf16 (VKG_MATMUL_B_F16 / _BF16), always widened to f32; C and R are row-major with unit
 * column stride.
 *
 * Variants: the same algorithm (matmul_body.h: packed panels and a register-blocked micro-kernel
 * for most shapes, B streamed from memory for a few rows: row by row when its columns are
 * contiguous, as dot products when its k is) built for one vector width each:
 * portable C (any CPU), AVX2 + FMA + F16C, AVX-512.  The fastest one the CPU runs is chosen at
 * run time from its features (the build never assumes them); tests run every variant.
 *
 * The contract every variant keeps, in every path:
 *   - each element is summed in float from 0 in k order, one product at a time: the portable
 *     variant rounds each product and each sum (sum = sum + a[k] * b[k]: exactly the naive
 *     float loop), the others fuse them (sum = fma(a[k], b[k], sum));
 *   - except on the dot-product path (vkg_mm_dot_path: B's k contiguous and not its columns, up
 *     to VKG_MM_DOT_ROWS rows, i.e. every decode step of a [N, K] weight): there product k goes
 *     into partial sum k % 16 (VKG_MM_DOT_LANES), each of the 16 summed as above in k order, and
 *     then sum t + sum t + 8 for t < 8, t + t + 4 for t < 4, t + t + 2, and sum 0 + sum 1;
 *   - so a variant's result never depends on the tiling, how the rows and columns are grouped,
 *     or how the units are spread over threads: identical bits for any thread count, and a row's
 *     bits for any M up to VKG_MM_DOT_ROWS (for any M where the path does not change: B's
 *     columns contiguous, or neither); the fused variants (AVX2, AVX-512) give identical bits to
 *     each other; fused and unfused differ by rounding only, within K * 2^-24 * sum |a[k] b[k]|
 *     of each other (the bound of either against the exact sum);
 *   - vector lanes are different elements, or on the dot-product path one element's 16 partial
 *     sums whatever the vector width (two vectors of AVX2, one of AVX-512, four of 4 floats). */
#include "cpu/kernels.h"

#include <stdatomic.h>
#include <string.h>

#include "base/error.h"
#include "cpu/cpu_features.h"
#include "cpu/matmul_variant.h"
#include "vkgraph_model.h"

/* A batch of sequences decodes its rows through one matmul per weight, 1 to VKG_BATCH_MAX_SEQ
 * rows, and promises each sequence the bits it gets alone (one row): every such M must take the
 * same path. */
_Static_assert(VKG_BATCH_MAX_SEQ <= VKG_MM_DOT_ROWS, "every batch's decode rows take the dot-product path");

typedef struct variant {
    const char *name;
    vkg_mm_fn *fn;
    int (*runs)(void); /* 1 when this CPU (and its OS) has the variant's instructions */
} variant;

static int always(void) { return 1; }
#if defined(VKG_MATMUL_X86)
static int has_avx2(void) { return (vkg_cpu_features() & VKG_CPU_AVX2) != 0; }
static int has_avx512(void) { return (vkg_cpu_features() & VKG_CPU_AVX512) != 0; }
#endif

/* Indexed by VKG_CPU_MATMUL_*; a variant not built for this architecture has no fn. */
static const variant variants[VKG_CPU_MATMUL_VARIANTS] = {
    [VKG_CPU_MATMUL_PORTABLE] = {"portable", vkg_mm_portable, always},
#if defined(VKG_MATMUL_X86)
    [VKG_CPU_MATMUL_AVX2] = {"avx2", vkg_mm_avx2, has_avx2},
    [VKG_CPU_MATMUL_AVX512] = {"avx512", vkg_mm_avx512, has_avx512},
#else
    [VKG_CPU_MATMUL_AVX2] = {"avx2", NULL, NULL},
    [VKG_CPU_MATMUL_AVX512] = {"avx512", NULL, NULL},
#endif
};

const char *vkg_cpu_matmul_variant_name(int v) {
    return v >= 0 && v < VKG_CPU_MATMUL_VARIANTS ? variants[v].name : "unknown";
}

int vkg_cpu_matmul_variant_runs(int v) {
    return v >= 0 && v < VKG_CPU_MATMUL_VARIANTS && variants[v].fn && variants[v].runs();
}

/* The widest variant the kernels may take (vkg_cpu_set_max_isa). */
static atomic_int max_variant = VKG_CPU_MATMUL_VARIANTS - 1;

int vkg_cpu_matmul_best_variant(void) {
    for (int v = atomic_load_explicit(&max_variant, memory_order_relaxed); v > 0; v--)
        if (vkg_cpu_matmul_variant_runs(v)) return v;
    return VKG_CPU_MATMUL_PORTABLE;
}

vkg_status vkg_cpu_set_max_isa(const char *isa, vkg_error *err) {
    int v = -1;
    if (!isa || strcmp(isa, "native") == 0) v = VKG_CPU_MATMUL_VARIANTS - 1;
    for (int i = 0; i < VKG_CPU_MATMUL_VARIANTS && v < 0; i++)
        if (strcmp(isa, variants[i].name) == 0) v = i;
    if (v < 0)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "CPU instruction set '%.40s': use avx512, avx2, portable "
                             "or native", isa);
    atomic_store_explicit(&max_variant, v, memory_order_relaxed);
    return VKG_OK;
}

const char *vkg_cpu_isa(void) { return vkg_cpu_matmul_variant_name(vkg_cpu_matmul_best_variant()); }

vkg_mm_view vkg_mm_view_of_batch(const vkg_matmul_params *p, const float *A, const void *B, float *C,
                                 const float *R, size_t batch) {
    const size_t b0 = batch / p->batch1, b1 = batch % p->batch1;
    vkg_mm_view v;
    v.b_type = p->flags & VKG_MATMUL_B_F16 ? VKG_MM_F16 : p->flags & VKG_MATMUL_B_BF16 ? VKG_MM_BF16 : VKG_MM_F32;
    const size_t b_index = p->b_offset + b0 * p->b_stride_b0 + b1 * p->b_stride_b1;
    v.b = v.b_type == VKG_MM_F32 ? (const void *)((const float *)B + b_index)
                                 : (const void *)((const uint16_t *)B + b_index);
    v.a = A + p->a_offset + b0 * p->a_stride_b0 + b1 * p->a_stride_b1;
    v.c = C + p->c_offset + b0 * p->c_stride_b0 + b1 * p->c_stride_b1;
    v.r = (p->flags & VKG_MATMUL_RESIDUAL) ? R + p->r_offset + b0 * p->r_stride_b0 + b1 * p->r_stride_b1 : NULL;
    v.a_sm = p->a_stride_m;
    v.a_sk = p->a_stride_k;
    v.b_sk = p->b_stride_k;
    v.b_sn = p->b_stride_n;
    v.c_sm = p->c_stride_m;
    v.r_sm = p->r_stride_m;
    return v;
}

static size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

size_t vkg_cpu_matmul_units(const vkg_matmul_params *p) {
    return (size_t)p->batch0 * p->batch1 * ceil_div(p->M, VKG_CPU_MATMUL_TILE_M) *
           ceil_div(p->N, VKG_CPU_MATMUL_TILE_N);
}

void vkg_cpu_matmul_with(int v, const vkg_matmul_params *p, const float *A, const void *B, float *C,
                         const float *bias, const float *R, size_t begin, size_t end) {
    if (!vkg_cpu_matmul_variant_runs(v)) v = VKG_CPU_MATMUL_PORTABLE;
    variants[v].fn(p, A, B, C, bias, R, begin, end);
}

void vkg_cpu_matmul(const vkg_matmul_params *p, const float *A, const void *B, float *C, const float *bias,
                    const float *R, size_t begin, size_t end) {
    vkg_cpu_matmul_with(vkg_cpu_matmul_best_variant(), p, A, B, C, bias, R, begin, end);
}
