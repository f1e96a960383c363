/* The AVX-512 attention variant (x86-64 with AVX-512 F/BW/DQ/VL and FMA, as the matmul's AVX-512
 * variant needs): vectors of 16 floats, 16 vectors of scores in registers, fused multiply-adds.
 * Only this file is built with those instructions (CMakeLists.txt); kernel_attention.c calls it
 * only on a CPU that has them. */
#include "cpu/attention_variant.h"

#if defined(VKG_MATMUL_X86)
#include <immintrin.h>

#include "cpu/vec_avx512.h"

enum { SCORE_ACC = 16, CH = 4, PV_ROWS = 4 };
#define NARROW_MAX_ROWS 4
#define ATTN_NAME vkg_attn_avx512

#include "cpu/attention_body.h"
#endif
