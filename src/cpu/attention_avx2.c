/* The AVX2 attention variant (x86-64 with AVX2 and FMA, as the matmul's AVX2 variant needs):
 * vectors of 8 floats, 8 vectors of scores in registers, fused multiply-adds.  Only this
 * file is built with those instructions (CMakeLists.txt); kernel_attention.c calls it only on a
 * CPU that has them. */
#include "cpu/attention_variant.h"

#if defined(VKG_MATMUL_X86)
#include <immintrin.h>

#include "cpu/vec_avx2.h"

enum { SCORE_ACC = 8, CH = 4, PV_ROWS = 2 };
#define NARROW_MAX_ROWS 4
#define ATTN_NAME vkg_attn_avx2

#include "cpu/attention_body.h"
#endif
