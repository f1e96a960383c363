/* out[r, :] = gamma * (in[r, :] - mean) / sqrt(var + eps) + beta over rows of cols elements
 * (contiguous).  var is the biased variance, as PyTorch's LayerNorm.
 * With VKG_LAYERNORM_RMS (RMS norm, as Llama's RMSNorm): out[r, :] = gamma * in[r, :] /
 * sqrt(mean(in[r, :]^2) + eps), no mean taken (beta unused).
 * Bindings: 0 in, 1 out, 2 gamma, 3 beta. */
#ifndef VKG_PARAMS_LAYERNORM_H
#define VKG_PARAMS_LAYERNORM_H
#include "common.h"

#define VKG_LAYERNORM_GAMMA 1u
#define VKG_LAYERNORM_BETA 2u
#define VKG_LAYERNORM_RMS 4u

VKG_PARAMS_BEGIN(vkg_layernorm_params)
    vkg_u32 rows, cols;
    vkg_u32 in_offset, out_offset, gamma_offset, beta_offset;
    vkg_f32 eps;
    vkg_u32 flags;
VKG_PARAMS_END(vkg_layernorm_params)

#endif
