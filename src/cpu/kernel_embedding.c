/* Embedding lookup: out[i, :] = table[ids[i] - row_begin, :] for the ids this step's row range
 * [row_begin, row_begin + row_count) holds; rows of dim elements.  An id outside [0, vocab) gives
 * a zero row when zero_invalid is set (one step of a split table does that); any other id leaves
 * its output row alone, for the step that holds its range. */
#include "cpu/kernels.h"

#include "base/half.h"

#include <string.h>

void vkg_cpu_embedding(const vkg_embedding_params *p, const int32_t *ids, const void *table,
                       float *out, size_t id_begin, size_t id_end) {
    for (size_t i = id_begin; i < id_end; i++) {
        int64_t id = ids[p->ids_offset + i];
        float *out_row = out + p->out_offset + i * p->dim;
        if (id >= p->row_begin && id < (int64_t)p->row_begin + p->row_count) {
            size_t first = p->table_offset + (size_t)(id - p->row_begin) * p->dim;
            const uint16_t *row16 = (const uint16_t *)table + first;
            if (p->flags & VKG_EMBEDDING_TABLE_F16)
                for (size_t j = 0; j < p->dim; j++) out_row[j] = vkg_f16_to_f32(row16[j]);
            else if (p->flags & VKG_EMBEDDING_TABLE_BF16)
                for (size_t j = 0; j < p->dim; j++) out_row[j] = vkg_bf16_to_f32(row16[j]);
            else
                memcpy(out_row, (const float *)table + first, sizeof(float) * p->dim);
        } else if (p->zero_invalid && (id < 0 || id >= p->vocab)) {
            memset(out_row, 0, sizeof(float) * p->dim);
        }
    }
}
