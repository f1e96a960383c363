/*
 * The seeded generator declared in vkgraph.h: xoshiro256** (Blackman and Vigna), its 256-bit state
 * filled from a 64-bit seed by splitmix64, as the authors of xoshiro recommend.
 *
 * Everything lives in the vkg_rng struct the caller owns: no global state, no cached second
 * Box-Muller value, so a copy of the struct replays exactly the same sequence.
 */
#include "vkgraph.h"

#include <math.h>

/* splitmix64: one step advances *state by the golden-ratio increment and returns a well-mixed
 * 64-bit value.  Used only to expand the seed, so that similar seeds (0, 1, 2) give unrelated
 * states and the state is never all zero (which would make xoshiro stuck at zero). */
static uint64_t splitmix64_next(uint64_t *state) {
    *state += 0x9E3779B97F4A7C15u;
    uint64_t z = *state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return z ^ (z >> 31);
}

static uint64_t rotate_left(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

void vkg_rng_seed(vkg_rng *r, uint64_t seed) {
    uint64_t sm_state = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64_next(&sm_state);
}

uint64_t vkg_rng_next(vkg_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotate_left(s[1] * 5u, 7) * 9u;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotate_left(s[3], 45);
    return result;
}

/* The top 24 bits (the best-mixed ones) fill a float's mantissa exactly: every value is a
 * multiple of 2^-24 in [0, 1 - 2^-24], and the conversion never rounds up to 1. */
float vkg_rng_uniform(vkg_rng *r) {
    return (float)(vkg_rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

/* Box-Muller from two fresh uniforms per call; only the cosine branch is used, so no state
 * hides outside the struct.  u1 is taken in (0, 1] so that log(u1) is finite; the tail is cut
 * at sqrt(-2 ln 2^-24) ~ 5.77 standard deviations, far beyond what initialisation or sampling
 * needs.  The arithmetic is done in double and rounded once to float. */
enum { DRAWS_PER_NORMAL = 2 };  /* vkg_rng_normal's two uniforms: vkg_rng_skip_normals counts on it */

float vkg_rng_normal(vkg_rng *r) {
    const double two_pi = 6.283185307179586476925286766559;
    double u1 = 1.0 - (double)vkg_rng_uniform(r);
    double u2 = (double)vkg_rng_uniform(r);
    return (float)(sqrt(-2.0 * log(u1)) * cos(two_pi * u2));
}

void vkg_rng_fill_normal(vkg_rng *r, float *x, size_t n, float std) {
    for (size_t i = 0; i < n; i++) x[i] = std * vkg_rng_normal(r);
}

/* xoshiro256's state transition is linear over GF(2).  Its characteristic polynomial is
 * p(x) = x^256 + the terms below (bit j % 64 of word j / 64: the coefficient of x^j), found by
 * Berlekamp-Massey over the sequence of one state bit (degree 256: the whole transition's).  So m
 * steps of the transition are the polynomial x^m mod p(x) applied to it: the sum of the states
 * after j steps for each j whose coefficient is 1, 256 steps whatever m, after about log2(m)
 * products of polynomials. */
static const uint64_t CHARPOLY_LOW[4] = {0x9d116f2bb0f0f001u, 0x0280002bcefd1a5eu, 0x04b4edcf26259f85u,
                                         0x0003c03c3f3ecb19u};

/* a(x) * x mod p(x), in place. */
static void times_x(uint64_t a[4]) {
    const uint64_t carry = a[3] >> 63;
    for (int w = 3; w > 0; w--) a[w] = (a[w] << 1) | (a[w - 1] >> 63);
    a[0] <<= 1;
    if (carry)
        for (int w = 0; w < 4; w++) a[w] ^= CHARPOLY_LOW[w];
}

/* out = a(x) * b(x) mod p(x): Horner over b's coefficients from the top; out may be a or b. */
static void times(const uint64_t a[4], const uint64_t b[4], uint64_t out[4]) {
    uint64_t acc[4] = {0, 0, 0, 0};
    for (int i = 255; i >= 0; i--) {
        times_x(acc);
        if ((b[i / 64] >> (i % 64)) & 1u)
            for (int w = 0; w < 4; w++) acc[w] ^= a[w];
    }
    for (int w = 0; w < 4; w++) out[w] = acc[w];
}

static void advance(vkg_rng *r, uint64_t steps) {
    if (steps <= 256) { /* as cheap as the jump's own walk */
        for (uint64_t i = 0; i < steps; i++) vkg_rng_next(r);
        return;
    }
    uint64_t poly[4] = {1, 0, 0, 0}; /* x^m for the bits of steps read so far, m from the top */
    for (int bit = 63 - __builtin_clzll(steps); bit >= 0; bit--) {
        times(poly, poly, poly);
        if ((steps >> bit) & 1u) times_x(poly);
    }
    vkg_rng walk = *r;
    uint64_t sum[4] = {0, 0, 0, 0};
    for (int j = 0; j < 256; j++) {
        if ((poly[j / 64] >> (j % 64)) & 1u)
            for (int w = 0; w < 4; w++) sum[w] ^= walk.s[w];
        vkg_rng_next(&walk);
    }
    for (int w = 0; w < 4; w++) r->s[w] = sum[w];
}

void vkg_rng_skip_normals(vkg_rng *r, size_t n) {
    const uint64_t draws = (uint64_t)n;
    if (draws <= UINT64_MAX / DRAWS_PER_NORMAL) {
        advance(r, draws * DRAWS_PER_NORMAL);
        return;
    }
    for (int k = 0; k < DRAWS_PER_NORMAL; k++) advance(r, draws);
}
