/* out[i, :] = table[ids[i], :] for n_ids ids, rows of dim elements.
 * A table too large for one binding is split into row ranges, one step each: a step copies the
 * rows whose id lies in [row_begin, row_begin + row_count) and leaves the others alone; the step
 * with zero_invalid set writes zeros for ids outside [0, vocab).
 * Bindings: 0 ids (i32), 1 table (the range's first row at table_offset), 2 out. */
#ifndef VKG_PARAMS_EMBEDDING_H
#define VKG_PARAMS_EMBEDDING_H
#include "common.h"

/* flags */
#define VKG_EMBEDDING_TABLE_F16 1u   /* the table's elements are IEEE half floats (16 bits)    */
#define VKG_EMBEDDING_TABLE_BF16 2u  /* ... bfloat16; with either, table_offset counts 16-bit
                                        elements; the output is f32                          */

VKG_PARAMS_BEGIN(vkg_embedding_params)
    vkg_u32 n_ids, dim, vocab;
    vkg_u32 ids_offset, table_offset, out_offset;
    vkg_u32 row_begin, row_count;
    vkg_u32 zero_invalid;
    vkg_u32 flags;
VKG_PARAMS_END(vkg_embedding_params)

#endif
