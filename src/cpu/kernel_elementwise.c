/* Element-wise kernels over a 4-d shape [s0, s1, s2, s3], element i at coordinates
 * (i0, i1, i2, i3) in row-major order:
 *   binary: out[off + i] = a[a_off + sum_k ik * a_strides[k]]  op  b[b_off + sum_k ik * b_strides[k]]
 *   unary:  out[out_off + index * out_dyn_stride + sum_k ik * out_strides[k]]
 *               = f(in[in_off + sum_k ik * in_strides[k]])
 *           (index: indices[dyn_index], or with dyn_rows indices[dyn_index + i0])
 * A stride of 0 broadcasts.  Work is done in runs along the last axis so the coordinates are
 * only recomputed once per run. */
#include "cpu/kernels.h"

/* The coordinates of element i of a row-major shape. */
static void coords_of(size_t i, const uint32_t shape[4], size_t c[4]) {
    c[3] = i % shape[3];
    i /= shape[3];
    c[2] = i % shape[2];
    i /= shape[2];
    c[1] = i % shape[1];
    c[0] = i / shape[1];
}

/* Moves c to the start of the next run along the last axis. */
static void next_run(const uint32_t shape[4], size_t c[4]) {
    c[3] = 0;
    if (++c[2] < shape[2]) return;
    c[2] = 0;
    if (++c[1] < shape[1]) return;
    c[1] = 0;
    ++c[0];
}

/* The offset of (c0, c1, c2, 0) through strides. */
static size_t run_offset(const size_t c[4], const uint32_t strides[4]) {
    return c[0] * strides[0] + c[1] * strides[1] + c[2] * strides[2];
}

static size_t numel(const uint32_t shape[4]) {
    return (size_t)shape[0] * shape[1] * shape[2] * shape[3];
}

size_t vkg_cpu_binary_units(const vkg_binary_params *p) { return numel(p->shape); }
size_t vkg_cpu_unary_units(const vkg_unary_params *p) { return numel(p->shape); }

static float binary_op(uint32_t op, float x, float y) {
    switch (op) {
    case VKG_BINARY_ADD: return x + y;
    case VKG_BINARY_MUL: return x * y;
    case VKG_BINARY_MASK: return y != 0.0f ? x : -INFINITY;
    case VKG_BINARY_SWIGLU: return vkg_cpu_activation(VKG_UNARY_SILU, x) * y;
    default: return NAN; /* rejected when the plan is checked */
    }
}

void vkg_cpu_binary(const vkg_binary_params *p, const float *a, const float *b, float *out,
                    size_t begin, size_t end) {
    size_t c[4];
    coords_of(begin, p->shape, c);
    for (size_t i = begin; i < end;) {
        const float *a_run = a + p->a_offset + run_offset(c, p->a_strides);
        const float *b_run = b + p->b_offset + run_offset(c, p->b_strides);
        float *out_run = out + p->out_offset + i;
        size_t run = p->shape[3] - c[3];
        if (run > end - i) run = end - i;
        for (size_t k = 0; k < run; k++) {
            size_t i3 = c[3] + k;
            out_run[k] = binary_op(p->op, a_run[i3 * p->a_strides[3]], b_run[i3 * p->b_strides[3]]);
        }
        i += run;
        next_run(p->shape, c);
    }
}

void vkg_cpu_unary(const vkg_unary_params *p, const float *in, float *out, const int32_t *indices,
                   size_t begin, size_t end) {
    int64_t index = vkg_cpu_dyn_index(indices, p->dyn_index);
    /* The executor checked that the runtime indices keep every write inside the binding. */
    float *out_base = out + ((int64_t)p->out_offset + index * (int64_t)p->out_dyn_stride);
    size_t c[4];
    coords_of(begin, p->shape, c);
    for (size_t i = begin; i < end;) {
        if (p->dyn_rows) { /* each i0 its own index (copies only: the plan check refuses others) */
            index = indices[p->dyn_index + c[0]];
            out_base = out + ((int64_t)p->out_offset + index * (int64_t)p->out_dyn_stride);
        }
        const float *in_run = in + p->in_offset + run_offset(c, p->in_strides);
        float *out_run = out_base + run_offset(c, p->out_strides);
        size_t run = p->shape[3] - c[3];
        if (run > end - i) run = end - i;
        /* causal: the last index i3 may not pass i2 + causal_offset + index (nor, with a window,
         * lie window or more behind it). */
        int64_t last_visible = (int64_t)c[2] + p->causal_offset + index;
        if (p->op == VKG_UNARY_COPY && p->in_strides[3] == 1 && p->out_strides[3] == 1) {
            /* a run of a copy (KV-cache writes, contiguous views): memmove reads the whole run
             * before writing it, as the element loop reads each element before writing it */
            memmove(out_run + c[3], in_run + c[3], run * sizeof(float));
            i += run;
            next_run(p->shape, c);
            continue;
        }
        for (size_t k = 0; k < run; k++) {
            size_t i3 = c[3] + k;
            float x = in_run[i3 * p->in_strides[3]], y;
            if (p->op == VKG_UNARY_SCALE) y = p->alpha * x;
            else if (p->op == VKG_UNARY_CAUSAL)
                y = (int64_t)i3 > last_visible || (p->window && (int64_t)i3 <= last_visible - (int64_t)p->window)
                        ? -INFINITY : x;
            else y = vkg_cpu_activation(p->op, x); /* copy and the activations; others refused by the plan check */
            out_run[i3 * p->out_strides[3]] = y;
        }
        i += run;
        next_run(p->shape, c);
    }
}
