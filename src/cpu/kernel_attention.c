/* Fused attention (params/attention.h), the reference the shader is checked against.  One unit
 * is one query row (b0, b1, t); its keys are walked in order j = 0, 1, ... with the online
 * softmax:
 *   s = scale * (q . k_j);  m' = max(m, s);  l = l e^(m - m') + e^(s - m');
 *   acc = acc e^(m - m') + e^(s - m') v_j;   out = acc / l
 * Blocked keys (causal: j > t + causal_offset + index) and keys whose score is -inf take no part,
 * so they weigh exactly 0, as softmax gives them.  A NaN score makes the row's outputs NaN, as it
 * makes every unblocked probability NaN in softmax. */
#include "cpu/kernels.h"

size_t vkg_cpu_attention_units(const vkg_attention_params *p) {
    return (size_t)p->batch0 * p->batch1 * p->T;
}

void vkg_cpu_attention(const vkg_attention_params *p, const float *q, const float *k, const float *v, float *out,
                       const int32_t *indices, size_t row_begin, size_t row_end) {
    int64_t index = p->mask_kind == VKG_ATTENTION_MASK_CAUSAL ? vkg_cpu_dyn_index(indices, p->dyn_index) : 0;
    float acc[VKG_ATTENTION_MAX_DV];
    for (size_t r = row_begin; r < row_end; r++) {
        size_t t = r % p->T, b1 = r / p->T % p->batch1, b0 = r / ((size_t)p->T * p->batch1);
        const float *qr = q + p->q_offset + b0 * p->q_stride_b0 + b1 * p->q_stride_b1 + t * p->q_stride_t;
        const float *kb = k + p->k_offset + b0 * p->k_stride_b0 + b1 * p->k_stride_b1;
        const float *vb = v + p->v_offset + b0 * p->v_stride_b0 + b1 * p->v_stride_b1;
        float *o = out + p->o_offset + b0 * p->o_stride_b0 + b1 * p->o_stride_b1 + t * p->o_stride_t;
        int64_t keys = p->S;
        if (p->mask_kind == VKG_ATTENTION_MASK_CAUSAL) {
            int64_t last = (int64_t)t + p->causal_offset + index;
            keys = last < 0 ? 0 : last + 1 < keys ? last + 1 : keys;
        }
        float m = -INFINITY, l = 0.0f;
        for (size_t d = 0; d < p->Dv; d++) acc[d] = 0.0f;
        for (int64_t j = 0; j < keys; j++) {
            const float *kj = kb + (size_t)j * p->k_stride_s, *vj = vb + (size_t)j * p->v_stride_s;
            float dot = 0.0f;
            for (size_t d = 0; d < p->D; d++) dot += qr[d * p->q_stride_d] * kj[d * p->k_stride_d];
            float s = p->scale * dot;
            if (s == -INFINITY) continue;
            if (!(s <= m)) { /* a new maximum, or NaN (which then stays) */
                float corr = expf(m - s);
                l *= corr;
                for (size_t d = 0; d < p->Dv; d++) acc[d] *= corr;
                m = s;
            }
            float e = expf(s - m);
            l += e;
            for (size_t d = 0; d < p->Dv; d++) acc[d] += e * vj[d * p->v_stride_d];
        }
        for (size_t d = 0; d < p->Dv; d++) o[d * p->o_stride_d] = l == 0.0f ? 0.0f : acc[d] / l;
    }
}
