/* Four floats in one 128-bit register, on every CPU variant (a GNU C vector: lanes are independent
 * IEEE operations; SSE on x86-64, NEON on arm64), and the 4 x 4 transposition through them that
 * the matmul's packing of B (matmul_body.h) and the attention's few-rows path (attention_body.h)
 * use: pure data movement, so the same on every variant. */
#ifndef VKG_CPU_VEC_X4_H
#define VKG_CPU_VEC_X4_H

typedef float mm_x4 __attribute__((vector_size(16)));
typedef int mm_i4 __attribute__((vector_size(16)));

#if defined(__clang__)
#define MM_SHUFFLE4(x, y, i0, i1, i2, i3) __builtin_shufflevector(x, y, i0, i1, i2, i3)
#else
#define MM_SHUFFLE4(x, y, i0, i1, i2, i3) __builtin_shuffle(x, y, (mm_i4){i0, i1, i2, i3})
#endif

/* r[q] holds element q of four rows r[0..3]; afterwards r[q] holds element q of each row, lane j
 * from row j. */
static inline __attribute__((always_inline)) void transpose4(mm_x4 r[4]) {
    mm_x4 lo01 = MM_SHUFFLE4(r[0], r[1], 0, 4, 1, 5), lo23 = MM_SHUFFLE4(r[2], r[3], 0, 4, 1, 5);
    mm_x4 hi01 = MM_SHUFFLE4(r[0], r[1], 2, 6, 3, 7), hi23 = MM_SHUFFLE4(r[2], r[3], 2, 6, 3, 7);
    r[0] = MM_SHUFFLE4(lo01, lo23, 0, 1, 4, 5);
    r[1] = MM_SHUFFLE4(lo01, lo23, 2, 3, 6, 7);
    r[2] = MM_SHUFFLE4(hi01, hi23, 0, 1, 4, 5);
    r[3] = MM_SHUFFLE4(hi01, hi23, 2, 3, 6, 7);
}

#endif
