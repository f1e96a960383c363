/* The portable attention variant: plain C with GNU vectors of 4 floats (SSE on x86-64, NEON on
 * arm64, scalar code elsewhere), products and sums rounded separately (this file is built with
 * -ffp-contract=off): each score is exactly the reference's float dot product.  It runs on any
 * CPU. */
#include "cpu/attention_variant.h"

#include "cpu/vec_portable.h"

enum { SCORE_ACC = 8, CH = 4, PV_ROWS = 2 };
#define NARROW_MAX_ROWS 2
#define ATTN_NAME vkg_attn_portable

#include "cpu/attention_body.h"
