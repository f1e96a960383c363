/* Row softmax with the attention prologue fused in.  The input is a contiguous
 * [d0, dim1, dim2, cols] tensor seen as rows r = (i0, i1, i2); for each row
 *   s_j = scale * in[r, j]  (+ mask[i0, i1, i2, j] when the mask is additive)
 *   blocked(j): causal  j > i2 + causal_offset + index (or, with a window, j <= that - window;
 *                       with VKG_MASK_ROWS_ONE_POSITION i2 is not added)
 *               bool    mask[i0, i1, i2, j] == 0
 *   out[r, j] = blocked(j) ? 0 : exp(s_j - max) / sum_{unblocked} exp(s_k - max)
 * with max over the unblocked s.  A row with every entry blocked (max = -inf) is all zeros, not
 * NaN; a NaN among the unblocked scores makes every unblocked output NaN (blocked ones stay 0). */
#include "cpu/kernels.h"

/* Which entries of row (i0, i1, i2) are blocked, and the scaled, masked scores.  Blocked
 * entries get s = -inf.  One loop per mask kind: straight-line loops the compiler vectorizes. */
static void masked_scores(const vkg_softmax_params *p, const float *in_row, const float *mask,
                          int64_t index, size_t i0, size_t i1, size_t i2, float *s) {
    const float *mask_row = NULL;
    if (p->mask_kind == VKG_SOFTMAX_MASK_BOOL || p->mask_kind == VKG_SOFTMAX_MASK_ADDITIVE)
        mask_row = mask + p->mask_offset + i0 * p->mask_strides[0] + i1 * p->mask_strides[1] +
                   i2 * p->mask_strides[2];
    const int64_t last_visible = (p->mask_rows & VKG_MASK_ROWS_ONE_POSITION ? 0 : (int64_t)i2) + p->causal_offset + index;
    const size_t ms = p->mask_strides[3];
    switch (p->mask_kind) {
    case VKG_SOFTMAX_MASK_CAUSAL:
        for (size_t j = 0; j < p->cols; j++) s[j] = (int64_t)j > last_visible ? -INFINITY : p->scale * in_row[j];
        if (p->window) /* the sliding window: keys window or more behind the query */
            for (size_t j = 0; j < p->cols && (int64_t)j <= last_visible - (int64_t)p->window; j++) s[j] = -INFINITY;
        break;
    case VKG_SOFTMAX_MASK_BOOL:
        for (size_t j = 0; j < p->cols; j++) s[j] = mask_row[j * ms] == 0.0f ? -INFINITY : p->scale * in_row[j];
        break;
    case VKG_SOFTMAX_MASK_ADDITIVE:
        for (size_t j = 0; j < p->cols; j++) s[j] = p->scale * in_row[j] + mask_row[j * ms];
        break;
    default:
        for (size_t j = 0; j < p->cols; j++) s[j] = p->scale * in_row[j];
        break;
    }
}

void vkg_cpu_softmax(const vkg_softmax_params *p, const float *in, float *out, const float *mask,
                     const int32_t *indices, size_t row_begin, size_t row_end) {
    for (size_t r = row_begin; r < row_end; r++) {
        size_t i2 = r % p->dim2, i1 = r / p->dim2 % p->dim1, i0 = r / ((size_t)p->dim1 * p->dim2);
        const int64_t index = p->mask_kind == VKG_SOFTMAX_MASK_CAUSAL
                                  ? vkg_cpu_dyn_index(indices, p->dyn_index + (p->mask_rows & VKG_MASK_ROWS_OWN_INDEX ? (uint32_t)i0 : 0u))
                                  : 0;
        const float *in_row = in + p->in_offset + r * p->cols;
        float *out_row = out + p->out_offset + r * p->cols;

        /* The scores go to the output row first (in place is fine: each in[j] is read before
         * out[j] is written). */
        masked_scores(p, in_row, mask, index, i0, i1, i2, out_row);

        /* max over the entries; a NaN is kept as the max (the first one), so that it reaches the
         * outputs.  The max and the NaN test in one loop without early exit (it vectorizes). */
        float max = -INFINITY;
        int nan = 0;
        for (size_t j = 0; j < p->cols; j++) {
            max = out_row[j] > max ? out_row[j] : max;
            nan |= out_row[j] != out_row[j];
        }
        if (nan)
            for (size_t j = 0; j < p->cols; j++)
                if (isnan(out_row[j])) {
                    max = out_row[j];
                    break;
                }
        if (max == -INFINITY) {
            for (size_t j = 0; j < p->cols; j++) out_row[j] = 0.0f;
            continue;
        }

        /* A -inf score (blocked, or masked by an additive -inf) gets weight exactly 0.  The
         * exponentials first (a loop the compiler vectorizes), then their sum in j order. */
        for (size_t j = 0; j < p->cols; j++)
            out_row[j] = out_row[j] == -INFINITY ? 0.0f : vkg_cpu_exp(out_row[j] - max);
        float sum = 0.0f;
        for (size_t j = 0; j < p->cols; j++) sum += out_row[j];
        /* Zero weights stay exactly 0 even when sum is NaN. */
        for (size_t j = 0; j < p->cols; j++)
            if (out_row[j] != 0.0f) out_row[j] /= sum;
    }
}
