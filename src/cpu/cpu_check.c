/* The plan checks behind cpu_check.h.  For each kernel, what its parameters make it touch: per
 * binding slot, whether it forms a pointer from the binding at all and the number of elements
 * (4 bytes each) from the binding's start that it may reach, computed as the largest index the
 * kernel's loops can form.  Sums saturate, so absurd parameters fail the check instead of
 * wrapping around into range. */
#include "cpu/cpu_check.h"

#include <inttypes.h>
#include <stdio.h>

#include "base/error.h"
#include "cpu/kernels.h"

typedef struct slot_use {
    int used;             /* the kernel forms a pointer from this binding (what it does there,
                             read or write, is graph/kernels.def's) */
    uint64_t elements;    /* elements it may reach from the binding's start; 0: none */
    unsigned elem_bytes;  /* 4, or 2 for a 16-bit operand (matmul's B, an embedding table) */
} slot_use;

static uint64_t sat_add(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
static uint64_t sat_mul(uint64_t a, uint64_t b) {
    return (a != 0 && b > UINT64_MAX / a) ? UINT64_MAX : a * b;
}

/* 1 + offset + sum_k (extent[k] - 1) * stride[k]: the elements an index over the box reaches;
 * 0 when the box is empty. */
static uint64_t reach(uint64_t offset, int n, const uint64_t *extent, const uint64_t *stride) {
    uint64_t last = offset;
    for (int k = 0; k < n; k++) {
        if (extent[k] == 0) return 0;
        last = sat_add(last, sat_mul(extent[k] - 1, stride[k]));
    }
    return sat_add(last, 1);
}

static uint64_t reach4(uint64_t offset, const uint32_t shape[4], const uint32_t strides[4]) {
    uint64_t e[4] = {shape[0], shape[1], shape[2], shape[3]};
    uint64_t s[4] = {strides[0], strides[1], strides[2], strides[3]};
    return reach(offset, 4, e, s);
}

static uint64_t numel4(const uint32_t shape[4]) {
    return sat_mul(sat_mul(shape[0], shape[1]), sat_mul(shape[2], shape[3]));
}

static void use(slot_use *u, uint64_t elements) {
    u->used = 1;
    u->elements = elements;
    u->elem_bytes = 4;
}

/* Each *_uses fills u[] and returns 0, or writes what is wrong with the parameters to why and
 * returns -1. */
static int matmul_uses(const vkg_matmul_params *p, slot_use *u, char *why, size_t size) {
    if (p->flags & ~(VKG_MATMUL_BIAS | VKG_MATMUL_RESIDUAL | VKG_MATMUL_GATE | VKG_MATMUL_B_F16 | VKG_MATMUL_B_BF16) ||
        ((p->flags & VKG_MATMUL_GATE) && !(p->flags & VKG_MATMUL_RESIDUAL)) ||
        (p->flags & VKG_MATMUL_B_F16 && p->flags & VKG_MATMUL_B_BF16))
        return snprintf(why, size, "unknown matmul flags 0x%x", p->flags), -1;
    if (!vkg_cpu_is_activation(p->activation))
        return snprintf(why, size, "unknown matmul activation %u", p->activation), -1;
    if (p->batch0 == 0 || p->batch1 == 0 || p->M == 0 || p->N == 0) return 0;
    uint64_t a_ext[4] = {p->batch0, p->batch1, p->M, p->K};
    uint64_t a_str[4] = {p->a_stride_b0, p->a_stride_b1, p->a_stride_m, p->a_stride_k};
    uint64_t b_ext[4] = {p->batch0, p->batch1, p->K, p->N};
    uint64_t b_str[4] = {p->b_stride_b0, p->b_stride_b1, p->b_stride_k, p->b_stride_n};
    uint64_t c_ext[4] = {p->batch0, p->batch1, p->M, p->N};
    uint64_t c_str[4] = {p->c_stride_b0, p->c_stride_b1, p->c_stride_m, 1};
    uint64_t r_str[4] = {p->r_stride_b0, p->r_stride_b1, p->r_stride_m, 1};
    use(&u[0], reach(p->a_offset, 4, a_ext, a_str));
    use(&u[1], reach(p->b_offset, 4, b_ext, b_str));
    if (p->flags & (VKG_MATMUL_B_F16 | VKG_MATMUL_B_BF16)) u[1].elem_bytes = 2;
    use(&u[2], reach(p->c_offset, 4, c_ext, c_str));
    if (p->flags & VKG_MATMUL_BIAS) use(&u[3], sat_add(p->bias_offset, p->N));
    if (p->flags & VKG_MATMUL_RESIDUAL) use(&u[4], reach(p->r_offset, 4, c_ext, r_str));
    return 0;
}

static int binary_uses(const vkg_binary_params *p, slot_use *u, char *why, size_t size) {
    if (p->op > VKG_BINARY_SWIGLU) return snprintf(why, size, "unknown binary op %u", p->op), -1;
    uint64_t n = numel4(p->shape);
    if (n == 0) return 0;
    use(&u[0], reach4(p->a_offset, p->shape, p->a_strides));
    use(&u[1], reach4(p->b_offset, p->shape, p->b_strides));
    use(&u[2], sat_add(p->out_offset, n));
    return 0;
}

static int unary_uses(const vkg_unary_params *p, slot_use *u, char *why, size_t size) {
    if (!vkg_unary_op_known(p->op)) return snprintf(why, size, "unknown unary op %u", p->op), -1;
    if (numel4(p->shape) == 0) return 0;
    use(&u[0], reach4(p->in_offset, p->shape, p->in_strides));
    /* With a runtime index the write moves; vkg_cpu_check_runtime_index checks each value. */
    use(&u[1], reach4(p->out_offset, p->shape, p->out_strides));
    if (p->dyn_rows && (p->op != VKG_UNARY_COPY || p->dyn_index == VKG_NO_INDEX || !p->out_dyn_stride))
        return snprintf(why, size, "an index for each i0 (dyn_rows) with op %u: only a copy to a moving place "
                        "takes them", p->op), -1;
    if (p->dyn_index != VKG_NO_INDEX) use(&u[2], (uint64_t)p->dyn_index + (p->dyn_rows ? p->shape[0] : 1u));
    return 0;
}

static int softmax_uses(const vkg_softmax_params *p, slot_use *u, char *why, size_t size) {
    if (p->mask_kind > VKG_SOFTMAX_MASK_ADDITIVE)
        return snprintf(why, size, "unknown softmax mask kind %u", p->mask_kind), -1;
    if (p->mask_rows & ~VKG_MASK_ROWS_ALL) return snprintf(why, size, "unknown mask_rows flags %#x", p->mask_rows), -1;
    if (p->rows == 0) return 0;
    if (p->dim1 == 0 || p->dim2 == 0)
        return snprintf(why, size, "softmax dim1 %u and dim2 %u must be at least 1", p->dim1, p->dim2), -1;
    uint64_t rows_cols = (uint64_t)p->rows * p->cols;
    use(&u[0], rows_cols ? sat_add(p->in_offset, rows_cols) : 0);
    use(&u[1], rows_cols ? sat_add(p->out_offset, rows_cols) : 0);
    if (p->mask_kind == VKG_SOFTMAX_MASK_BOOL || p->mask_kind == VKG_SOFTMAX_MASK_ADDITIVE) {
        /* The largest (i0, i1, i2) each row index can give (a box around them all). */
        uint64_t plane = (uint64_t)p->dim1 * p->dim2, last = p->rows - 1;
        uint64_t ext[4] = {last / plane + 1, last >= plane ? p->dim1 : last / p->dim2 + 1,
                           last >= p->dim2 ? p->dim2 : last + 1, p->cols};
        uint64_t str[4] = {p->mask_strides[0], p->mask_strides[1], p->mask_strides[2],
                           p->mask_strides[3]};
        use(&u[2], reach(p->mask_offset, 4, ext, str));
    }
    if (p->mask_kind == VKG_SOFTMAX_MASK_CAUSAL && p->dyn_index != VKG_NO_INDEX)
        use(&u[3], (uint64_t)p->dyn_index + (p->mask_rows & VKG_MASK_ROWS_OWN_INDEX && p->rows ? ((uint64_t)p->rows - 1) / ((uint64_t)p->dim1 * p->dim2) + 1 : 1u));
    return 0;
}

/* One past the last cache element the rope's cache rows (b1 >= cache_first) reach from `first`,
 * over `rows` of its rows t. */
static uint64_t cache_reach(const vkg_rope_params *p, uint64_t first, uint64_t rows) {
    const uint64_t n = p->batch1 - p->cache_first;
    const uint64_t e[4] = {(n + p->cache_heads - 1) / p->cache_heads, n < p->cache_heads ? n : p->cache_heads, rows,
                           p->D};
    const uint64_t s[4] = {p->cache_stride_g, p->cache_stride_a, p->cache_stride_t, 1};
    return reach(first, 4, e, s);
}

static int rope_uses(const vkg_rope_params *p, slot_use *u, char *why, size_t size) {
    if (p->D % 2) return snprintf(why, size, "rope rows of odd width %u", p->D), -1;
    const uint64_t rows = sat_mul(sat_mul(p->batch0, p->batch1), p->T);
    if (rows == 0 || p->D == 0) return 0;
    const uint64_t e[4] = {p->batch0, p->batch1, p->T, p->D};
    const uint64_t s[4] = {p->x_stride_b0, p->x_stride_b1, p->x_stride_t, p->x_stride_d};
    use(&u[0], reach(p->x_offset, 4, e, s));
    /* a position outside the table's rows reads nothing (the row comes out NaN) */
    if (p->positions) use(&u[1], sat_add(p->table_offset, sat_mul(p->positions, p->D)));
    use(&u[2], sat_add(p->out_offset, sat_mul(rows, p->D)));
    uint64_t indices = p->dyn_index != VKG_NO_INDEX ? (uint64_t)p->dyn_index + 1 : 0;
    if (p->row_positions) use(&u[4], sat_add(p->positions_offset, p->T));
    if (p->cache_heads) {
        if (p->batch0 != 1 || p->cache_first >= p->batch1)
            return snprintf(why, size, "rope rows into the cache from head %u of %u (batch0 %u): the last heads of "
                            "one batch entry go there", p->cache_first, p->batch1, p->batch0), -1;
        if (p->cache_rows && p->cache_index == VKG_NO_INDEX)
            return snprintf(why, size, "rope rows into the cache each at its own index, without an index"), -1;
        /* With a runtime index the rows move; vkg_cpu_check_runtime_index checks each value. */
        use(&u[5], cache_reach(p, p->cache_offset, p->T));
        if (p->cache_index != VKG_NO_INDEX) {
            const uint64_t cache = (uint64_t)p->cache_index + (p->cache_rows ? p->T : 1u);
            if (cache > indices) indices = cache;
        }
    }
    if (indices) use(&u[3], indices);
    return 0;
}
static int layernorm_uses(const vkg_layernorm_params *p, slot_use *u, char *why, size_t size) {
    if (p->flags & ~(VKG_LAYERNORM_GAMMA | VKG_LAYERNORM_BETA | VKG_LAYERNORM_RMS))
        return snprintf(why, size, "unknown layernorm flags 0x%x", p->flags), -1;
    if (p->rows == 0) return 0;
    uint64_t rows_cols = (uint64_t)p->rows * p->cols;
    use(&u[0], rows_cols ? sat_add(p->in_offset, rows_cols) : 0);
    use(&u[1], rows_cols ? sat_add(p->out_offset, rows_cols) : 0);
    if (p->flags & VKG_LAYERNORM_GAMMA) use(&u[2], p->cols ? sat_add(p->gamma_offset, p->cols) : 0);
    if (p->flags & VKG_LAYERNORM_BETA) use(&u[3], p->cols ? sat_add(p->beta_offset, p->cols) : 0);
    return 0;
}

static int embedding_uses(const vkg_embedding_params *p, slot_use *u, char *why, size_t size) {
    if (p->flags & ~(VKG_EMBEDDING_TABLE_F16 | VKG_EMBEDDING_TABLE_BF16) ||
        p->flags == (VKG_EMBEDDING_TABLE_F16 | VKG_EMBEDDING_TABLE_BF16))
        return snprintf(why, size, "unknown embedding flags 0x%x", p->flags), -1;
    if (p->n_ids == 0) return 0;
    use(&u[0], sat_add(p->ids_offset, p->n_ids));
    if (p->row_count > 0) {
        uint64_t table = (uint64_t)p->row_count * p->dim;
        use(&u[1], table ? sat_add(p->table_offset, table) : 0);
        if (p->flags) u[1].elem_bytes = 2;
    }
    uint64_t out = (uint64_t)p->n_ids * p->dim;
    use(&u[2], out ? sat_add(p->out_offset, out) : 0);
    return 0;
}

static int attention_uses(const vkg_attention_params *p, slot_use *u, char *why, size_t size) {
    if (p->mask_kind > VKG_ATTENTION_MASK_CAUSAL)
        return snprintf(why, size, "unknown attention mask kind %u", p->mask_kind), -1;
    if (p->Dv > VKG_ATTENTION_MAX_DV)
        return snprintf(why, size, "attention rows of %u values; at most %u", p->Dv, VKG_ATTENTION_MAX_DV), -1;
    if (p->mask_rows & ~VKG_MASK_ROWS_ALL) return snprintf(why, size, "unknown mask_rows flags %#x", p->mask_rows), -1;
    if (p->batch0 == 0 || p->batch1 == 0 || p->T == 0) return 0;
    uint64_t q_ext[4] = {p->batch0, p->batch1, p->T, p->D}, o_ext[4] = {p->batch0, p->batch1, p->T, p->Dv};
    uint64_t k_ext[4] = {p->batch0, p->batch1, p->S, p->D}, v_ext[4] = {p->batch0, p->batch1, p->S, p->Dv};
    uint64_t q_str[4] = {p->q_stride_b0, p->q_stride_b1, p->q_stride_t, p->q_stride_d};
    uint64_t k_str[4] = {p->k_stride_b0, p->k_stride_b1, p->k_stride_s, p->k_stride_d};
    uint64_t v_str[4] = {p->v_stride_b0, p->v_stride_b1, p->v_stride_s, p->v_stride_d};
    uint64_t o_str[4] = {p->o_stride_b0, p->o_stride_b1, p->o_stride_t, p->o_stride_d};
    if (p->S > 0 && p->D > 0) {
        use(&u[0], reach(p->q_offset, 4, q_ext, q_str));
        use(&u[1], reach(p->k_offset, 4, k_ext, k_str));
    }
    if (p->S > 0 && p->Dv > 0) use(&u[2], reach(p->v_offset, 4, v_ext, v_str));
    if (p->Dv > 0) use(&u[3], reach(p->o_offset, 4, o_ext, o_str));
    if (p->mask_kind == VKG_ATTENTION_MASK_CAUSAL && p->dyn_index != VKG_NO_INDEX)
        use(&u[4], (uint64_t)p->dyn_index + (p->mask_rows & VKG_MASK_ROWS_OWN_INDEX ? (uint64_t)p->batch0 : 1u));
    return 0;
}

static int step_uses(const vkg_step *s, slot_use *u, char *why, size_t size) {
    switch (s->kernel) {
#define VKG_KERNEL(ENUM, name, n_bindings, units, cost, ...) \
    case VKG_KERNEL_##ENUM: return name##_uses(&s->params.name, u, why, size);
#include "graph/kernels.def"
    case VKG_KERNEL_COUNT: break;
    }
    return snprintf(why, size, "unknown kernel %d", (int)s->kernel), -1;
}

static vkg_status check_slot(const vkg_plan *p, int i, int slot, const slot_use *u, vkg_error *err) {
    const vkg_step *s = &p->steps[i];
    const vkg_binding *b = &s->bind[slot];
    const char *name = vkg_kernel_binding_name(s->kernel, slot);
    if (b->region == -1) {
        if (!u->used) return VKG_OK;
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                             "step %d (%s): its parameters use binding %d (%s), but the slot is empty",
                             i, s->label, slot, name);
    }
    if (b->region < 0 || b->region >= p->n_regions)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                             "step %d (%s): binding %d (%s) names region %d; the plan has %d regions",
                             i, s->label, slot, name, (int)b->region, p->n_regions);
    const vkg_region *r = &p->regions[b->region];
    const unsigned es = u->used ? u->elem_bytes : 4;
    if (b->offset % es != 0)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                             "step %d (%s): binding %d (%s) starts at byte %" PRIu64
                             ", not a multiple of %u", i, s->label, slot, name, b->offset, es);
    if (b->offset > r->bytes || b->bytes > r->bytes - b->offset)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                             "step %d (%s): binding %d (%s) spans bytes [%" PRIu64 ", %" PRIu64
                             ") of region %d, which holds %" PRIu64 " bytes",
                             i, s->label, slot, name, b->offset, sat_add(b->offset, b->bytes),
                             (int)b->region, r->bytes);
    if (!u->used) return VKG_OK;
    if (u->elements > b->bytes / es)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                             "step %d (%s): its parameters reach %" PRIu64
                             " elements of binding %d (%s), which holds %" PRIu64 " bytes (%" PRIu64
                             " elements)", i, s->label, u->elements, slot, name, b->bytes, b->bytes / es);
    if (vkg_dtype_size(r->dtype) != es && r->kind != VKG_REGION_ARENA)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                             "step %d (%s): binding %d (%s) reads %u-byte elements from region %d, which holds %s",
                             i, s->label, slot, name, es, (int)b->region, vkg_dtype_name(r->dtype));
    if ((vkg_kernel_binding_writes(s->kernel, slot) || b->writes) && r->kind == VKG_REGION_CONSTANT)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                             "step %d (%s): binding %d (%s) would write to region %d, a constant",
                             i, s->label, slot, name, (int)b->region);
    return VKG_OK;
}

vkg_status vkg_cpu_check_plan(const vkg_plan *p, vkg_error *err) {
    for (int r = 0; r < p->n_regions; r++)
        if (p->regions[r].kind == VKG_REGION_CONSTANT && p->regions[r].bytes > 0 &&
            (!p->regions[r].host || (uintptr_t)p->regions[r].host % vkg_dtype_size(p->regions[r].host_dtype) != 0))
            return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                                 "region %d is a constant of %" PRIu64
                                 " bytes whose host data is %s", r, p->regions[r].bytes,
                                 p->regions[r].host ? "not aligned to its elements" : "missing");
    for (int i = 0; i < p->n_steps; i++) {
        slot_use u[VKG_MAX_BINDINGS] = {{0}};
        char why[128];
        if (step_uses(&p->steps[i], u, why, sizeof why) != 0)
            return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "step %d (%s): %s", i,
                                 p->steps[i].label, why);
        for (int slot = 0; slot < VKG_MAX_BINDINGS; slot++) {
            vkg_status st = check_slot(p, i, slot, &u[slot], err);
            if (st != VKG_OK) return st;
        }
    }
    return VKG_OK;
}

static vkg_status moved_outside(int step, const vkg_step *s, int64_t index, uint64_t bound, vkg_error *err) {
    return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                         "step %d (%s): runtime index %" PRId64 " moves the write outside its output (%" PRIu64
                         " elements); the index is out of range for it", step, s->label, index, bound);
}

/* A rope step's rows into the cache (params/rope.h): each moved by its index stays in binding 5. */
static vkg_status rope_cache_index(int step, const vkg_step *s, const int32_t *indices, vkg_error *err) {
    const vkg_rope_params *r = &s->params.rope;
    if (!r->cache_heads || r->cache_index == VKG_NO_INDEX || r->cache_first >= r->batch1 || r->T == 0) return VKG_OK;
    const uint64_t bound = s->bind[5].bytes / 4;
    /* One index moves every row; with cache_rows row t moves by its own. */
    const uint32_t parts = r->cache_rows ? r->T : 1u;
    for (uint32_t t = 0; t < parts; t++) {
        const int64_t index = indices[r->cache_index + t];
        const int64_t first = (int64_t)r->cache_offset + (int64_t)t * r->cache_stride_t + index * (int64_t)r->cache_dyn_stride;
        if (first < 0 || cache_reach(r, (uint64_t)first, r->cache_rows ? 1u : r->T) > bound)
            return moved_outside(step, s, index, bound, err);
    }
    return VKG_OK;
}

vkg_status vkg_cpu_check_runtime_index(const vkg_plan *p, int step, const int32_t *indices, vkg_error *err) {
    const vkg_step *s = &p->steps[step];
    if (s->kernel == VKG_KERNEL_ROPE) return rope_cache_index(step, s, indices, err);
    if (s->kernel != VKG_KERNEL_UNARY) return VKG_OK;
    const vkg_unary_params *u = &s->params.unary;
    if (u->dyn_index == VKG_NO_INDEX || u->out_dyn_stride == 0 || numel4(u->shape) == 0) return VKG_OK;
    const uint64_t bound = s->bind[1].bytes / 4;
    /* One index moves the whole write; with dyn_rows each i0's part moves by its own. */
    const uint32_t parts = u->dyn_rows ? u->shape[0] : 1u;
    uint32_t part[4] = {u->dyn_rows ? 1u : u->shape[0], u->shape[1], u->shape[2], u->shape[3]};
    for (uint32_t i0 = 0; i0 < parts; i0++) {
        const int64_t index = indices[u->dyn_index + i0];
        /* |index| < 2^31 and the stride < 2^32, so neither the product nor the sum overflows. */
        const int64_t first = (int64_t)u->out_offset + (int64_t)i0 * u->out_strides[0] + index * (int64_t)u->out_dyn_stride;
        if (first < 0 || reach4((uint64_t)first, part, u->out_strides) > bound)
            return moved_outside(step, s, index, bound, err);
    }
    return VKG_OK;
}
