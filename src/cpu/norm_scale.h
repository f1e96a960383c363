/* The steps of a normalisation over a row (layernorm; any norm that divides by the root of a mean
 * of squares) that keep its precision whatever the row's magnitude; shaders/norm_scale.glsl is
 * the same in GLSL.
 *
 * The row is scaled by a power of two a, exactly, so that its largest magnitude m lands in
 * [0.5, 1): deviations and their squares then stay inside float's range (in float, squares of
 * deviations of 1e-30 give 0 and of 1e20 give inf, making the variance 0 or inf), and a sum of
 * squares of n terms stays under 64 n.  The mean of squares var_s is taken over the scaled row;
 * 1 / sqrt(var + eps) over the original row is then a / sqrt(var_s + eps a^2), and
 * (x - mean) / sqrt(var + eps) = (x a - mean_s) / sqrt(var_s + eps a^2): a cancels. */
#ifndef VKG_CPU_NORM_SCALE_H
#define VKG_CPU_NORM_SCALE_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/kernels.h"

typedef struct vkg_norm_scale {
    float a;     /* 2^-e: the row's scale */
    float inv_a; /* 2^e */
    int e;
} vkg_norm_scale;

/* 2^e for e in [-126, 127], built from its bits (exact, as the shader builds it). */
static inline float vkg_norm_pow2(int e) { return vkg_cpu_bits_float((uint32_t)(e + 127) << 23); }

/* The exponent of x (x = f 2^e with f in [0.5, 1)) from its bits; -126 for 0 and subnormals. */
static inline int vkg_norm_exponent_of(float x) {
    const int e = (int)((vkg_cpu_float_bits(x) >> 23) & 0xffu) - 126;
    return e < -126 ? -126 : e;
}

/* The scale for a row whose largest magnitude is m.  e is kept in [-126, 126] so that 2^e and
 * 2^-e are normal floats: a row of subnormals is scaled by 2^126 only, one beyond 2^126 lands
 * under 4.  A row of zeros, or holding inf or NaN (whose result is NaN anyway), keeps a = 1. */
static inline vkg_norm_scale vkg_norm_scale_of(float m) {
    int e = 0;
    if (m > 0.0f && m <= FLT_MAX) {
        e = vkg_norm_exponent_of(m);
        e = e > 126 ? 126 : e;
    }
    vkg_norm_scale s = {vkg_norm_pow2(-e), vkg_norm_pow2(e), e};
    return s;
}

/* 1 / sqrt(var_s + eps a^2), for var_s the mean of squares of the scaled row (at most 64) and
 * eps >= 0, without overflow: where eps a^2 reaches 2^100, var_s (under 64) is below 2^-94 of it
 * and the result is (1 / sqrt(eps)) 2^e (0 for eps = inf).  A positive eps a^2 that underflows
 * counts as FLT_MIN, so a row of equal values (var_s = 0) still gives 0 rather than 0 * inf =
 * NaN; eps = 0 over such a row gives NaN, as the formula does. */
static inline float vkg_norm_rstd(vkg_norm_scale s, float var_s, float eps) {
    if (!(eps <= FLT_MAX)) return 1.0f / sqrtf(eps) * s.inv_a;
    if (eps > 0.0f && vkg_norm_exponent_of(eps) - 2 * s.e > 100) return 1.0f / sqrtf(eps) * s.inv_a;
    float ea = eps * s.a * s.a; /* (eps a) a: neither product overflows below the bound above */
    if (eps > 0.0f && ea < FLT_MIN) ea = FLT_MIN;
    return 1.0f / sqrtf(var_s + ea);
}

#endif
