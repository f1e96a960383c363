// The steps of a normalisation over a row that keep its precision whatever the row's magnitude:
// the same as src/cpu/norm_scale.h, whose comment says why.  The row is scaled by a = 2^-e
// (exact) so that its largest magnitude lands in [0.5, 1), its mean of squares var_s is taken
// over the scaled row, and (x - mean) / sqrt(var + eps) = (x a - mean_s) / sqrt(var_s + eps a^2).
#ifndef VKG_NORM_SCALE_GLSL
#define VKG_NORM_SCALE_GLSL

// 2^e for e in [-126, 127], built from its bits: exact (ldexp and exp2 need not be, in GLSL).
float vkg_pow2(int e) {
    return uintBitsToFloat(uint(e + 127) << 23);
}

// The exponent of x (x = f 2^e with f in [0.5, 1)) from its bits; -126 for 0 and subnormals.
int vkg_exponent(float x) {
    return max(int((floatBitsToUint(x) >> 23) & 0xffu) - 126, -126);
}

// e for a row whose largest magnitude is m, in [-126, 126] (2^e and 2^-e normal); 0 for a row of
// zeros or one holding inf or NaN.
int vkg_norm_exponent(float m) {
    return m > 0.0 && !isinf(m) && !isnan(m) ? min(vkg_exponent(m), 126) : 0;
}

// 1 / sqrt(var_s + eps a^2) for a = 2^-e and eps >= 0, without overflow: where eps a^2 reaches
// 2^100, var_s (under 64) is negligible and the result is (1 / sqrt(eps)) 2^e (0 for eps = inf);
// a positive eps a^2 that underflows counts as the smallest normal float.
float vkg_norm_rstd(int e, float var_s, float eps) {
    if (isinf(eps)) return 0.0;
    if (eps > 0.0 && vkg_exponent(eps) - 2 * e > 100) return 1.0 / sqrt(eps) * vkg_pow2(e);
    float a = vkg_pow2(-e);
    float ea = eps * a * a;
    if (eps > 0.0 && ea < 1.17549435e-38) ea = 1.17549435e-38;
    return 1.0 / sqrt(var_s + ea);
}

#endif
