/* 16-bit floats: IEEE 754 half (f16) and bfloat16 (bf16, the upper half of an f32), to and from
 * f32.  The one implementation, shared by the safetensors reader and writer, the loader's
 * conversions and the CPU kernels that read 16-bit weights.  Widening is exact (every f16 and bf16
 * value is an f32), subnormals, infinities and NaN payloads included; narrowing rounds to nearest
 * even, overflows to inf, and keeps NaN a (quiet) NaN. */
#ifndef VKG_BASE_HALF_H
#define VKG_BASE_HALF_H

#include <stdint.h>
#include <string.h>

static inline float vkg_f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint32_t vkg_bits_from_f32(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* The exponent and mantissa moved into f32's places and scaled by 2^(127 - 15): exact for normal
 * and subnormal halves alike; a half of exponent 31 (inf, NaN) lands at 2^16 or above and gets
 * f32's all-ones exponent, its mantissa (NaN payload) kept. */
static inline float vkg_f16_to_f32(uint16_t h) {
    float v = vkg_f32_from_bits((uint32_t)(h & 0x7FFFu) << 13) * 0x1p112f;
    uint32_t u = vkg_bits_from_f32(v);
    if (v >= 65536.0f) u |= 0x7F800000u;
    return vkg_f32_from_bits(u | ((uint32_t)(h & 0x8000u) << 16));
}

static inline float vkg_bf16_to_f32(uint16_t b) { return vkg_f32_from_bits((uint32_t)b << 16); }

static inline uint16_t vkg_f32_to_f16(float f) {
    uint32_t u = vkg_bits_from_f32(f), x = u & 0x7FFFFFFFu;
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    if (x > 0x7F800000u) return sign | 0x7E00 | (uint16_t)((x >> 13) & 0x1FF); /* quiet nan */
    if (x >= 0x477FF000u) return sign | 0x7C00;  /* >= 65520 rounds to inf                 */
    if (x >= 0x38800000u) {                      /* normal in f16: rebias, round to even    */
        uint32_t r = x - 0x38000000u;
        return sign | (uint16_t)((r + 0x0FFFu + ((r >> 13) & 1u)) >> 13);
    }
    if (x <= 0x33000000u) return sign;           /* <= 2^-25 rounds to zero (tie to even)   */
    uint32_t m = (x & 0x7FFFFFu) | 0x800000u, shift = 126u - (x >> 23); /* subnormal result */
    uint32_t h = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) h++;
    return sign | (uint16_t)h;
}

static inline uint16_t vkg_f32_to_bf16(float f) {
    uint32_t u = vkg_bits_from_f32(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet nan */
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* n floats rounded to bf16 (bf16 != 0) or f16, into h. */
static inline void vkg_f32_to_16bit_n(const float *x, uint16_t *h, size_t n, int bf16) {
    for (size_t i = 0; i < n; i++) h[i] = bf16 ? vkg_f32_to_bf16(x[i]) : vkg_f32_to_f16(x[i]);
}

#endif
