/* What kernel_matmul.c shares with its variants (matmul_portable.c, matmul_avx2.c,
 * matmul_avx512.c): the unit and block sizes every variant uses (so the parallel units, and hence
 * the results, never depend on the variant's register blocking) and one batch entry's view of
 * the operands.  Each variant is the same algorithm (matmul_body.h) built for one
 * vector width. */
#ifndef VKG_CPU_MATMUL_VARIANT_H
#define VKG_CPU_MATMUL_VARIANT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cpu/kernels.h"
#include "cpu/vec_x4.h"

enum {
    VKG_MM_KC = 128,       /* k per packed block: a packed strip of B (KC x NR) stays in L1     */
    VKG_MM_FEW_ROWS = 8,   /* up to this many rows with B's columns contiguous, B is streamed
                              from memory instead of packed (decoding)                        */
    VKG_MM_PASS_ROWS = 4,  /* rows of A per pass over a block of B whose columns are contiguous */
    VKG_MM_DOT_ROWS = 64,  /* up to this many rows with B's k contiguous (and not its columns),
                              each element is a dot product split over VKG_MM_DOT_LANES partial
                              sums (vkg_mm_dot_path); at least VKG_BATCH_MAX_SEQ, so that a
                              batch's decode rows all take that path (kernel_matmul.c)        */
    VKG_MM_DOT_LANES = 16, /* the partial sums of one element on that path, whatever the vector
                              width: element k of the row goes into sum k % 16               */
    VKG_MM_DOT_PASS = 8,   /* rows of A per pass over a block of B on that path               */
    VKG_MM_DOT_BLOCK = 128 << 10, /* bytes of B per block on that path with more rows than one
                              pass: the block stays in L2 while every pass reads it         */
    VKG_MM_A_CACHED = 1 << 20, /* bytes of a tile's rows of A (all of K) beyond which they are
                              not expected to stay in L2 from one tile to the next: the tiles
                              then prefetch A in software                                     */
    VKG_MM_STREAM_SUMS = 8192 /* floats of sums of a block of columns on the few-rows paths
                              (32 KiB): the wider a block, the longer each run read from a row
                              of B (or each band of columns on the dot-product path)         */
};


/* 1 when every element of p is summed by the dot-product path (matmul_body.h, dot_group): B's k
 * contiguous and not its columns (a [N, K] weight, Hugging Face's Linear layout, or a tied head),
 * up to VKG_MM_DOT_ROWS rows.  Its sums are split by k % VKG_MM_DOT_LANES and the partial sums
 * then added pairwise (kernel_matmul.c states the order); everything else sums in k order. */
static inline int vkg_mm_dot_path(const vkg_matmul_params *p) {
    return p->b_stride_k == 1 && p->b_stride_n != 1 && p->M <= VKG_MM_DOT_ROWS;
}

/* B's element type (the VKG_MATMUL_B_* flags). */
enum { VKG_MM_F32, VKG_MM_F16, VKG_MM_BF16 };

/* One batch entry's operands: element (m, k) of A is a[m * a_sm + k * a_sk]; element (k, n) of
 * B is element k * b_sk + n * b_sn of b, whose elements are b_type (4 or 2 bytes). */
typedef struct vkg_mm_view {
    const float *a, *r;
    const void *b;
    float *c;
    int b_type;
    size_t a_sm, a_sk, b_sk, b_sn, c_sm, r_sm;
} vkg_mm_view;

vkg_mm_view vkg_mm_view_of_batch(const vkg_matmul_params *p, const float *A, const void *B, float *C,
                                 const float *R, size_t batch);

/* A variant's whole kernel, with vkg_cpu_matmul's meaning. */
typedef void vkg_mm_fn(const vkg_matmul_params *p, const float *A, const void *B, float *C,
                       const float *bias, const float *R, size_t begin, size_t end);

vkg_mm_fn vkg_mm_portable;
#if defined(VKG_MATMUL_X86)
vkg_mm_fn vkg_mm_avx2;
vkg_mm_fn vkg_mm_avx512;
#endif

#endif
