/* The random graph generator.  Each step picks an op and operands from a pool of tensors made so
 * far (biased towards recent ones, so chains form, but any may be picked again, so DAGs and
 * tensors read several times form too) and creates whatever extra leaves the op needs with
 * shapes that fit.  Masked scores (with -inf) never enter the pool: they go straight into a
 * softmax, as attention does.  Values stay moderate (weights scaled by 1/sqrt(K)) so float32
 * results can be compared closely with the reference. */
#include "support/random_graph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "graph/graph_build.h"

typedef struct rg_shape {
    int ndim;
    int64_t d[VKG_MAX_DIMS];
} rg_shape;

static int rnd(random_graph *rg, int n) { return n <= 1 ? 0 : (int)(vkg_rng_next(&rg->rng) % (uint64_t)n); }
static int chance(random_graph *rg, int percent) { return rnd(rg, 100) < percent; }

static int64_t shape_numel(const rg_shape *s) { return vkg_shape_numel(s->ndim, s->d); }

static rg_shape shape_of(const random_graph *rg, vkg_tensor t) {
    rg_shape s;
    s.ndim = vkg_tensor_shape(rg->g, t, s.d);
    return s;
}

static const char *next_name(random_graph *rg, const char *prefix, char *buf, size_t size) {
    snprintf(buf, size, "%s%d", prefix, rg->n_names++);
    return buf;
}

static void pool_add(random_graph *rg, vkg_tensor t) {
    if (t == VKG_NONE) return;
    if (rg->n_pool < RG_MAX_POOL) rg->pool[rg->n_pool++] = t;
}

/* A random small dimension, mostly 1..8. */
static int64_t small_dim(random_graph *rg) {
    static const int64_t dims[] = {1, 2, 2, 3, 3, 4, 4, 5, 6, 7, 8};
    return dims[rnd(rg, (int)(sizeof dims / sizeof dims[0]))];
}

static rg_shape random_shape(random_graph *rg, int min_ndim) {
    rg_shape s;
    do {
        s.ndim = min_ndim + rnd(rg, VKG_MAX_DIMS - min_ndim + 1);
        for (int i = 0; i < s.ndim; i++) s.d[i] = small_dim(rg);
    } while (shape_numel(&s) > RG_MAX_NUMEL / 2);
    return s;
}

/* ---- leaves -------------------------------------------------------------------------------- */

static vkg_tensor new_input(random_graph *rg, const rg_shape *s) {
    if (rg->n_inputs >= RG_MAX_INPUTS) return VKG_NONE;
    char name[32];
    vkg_tensor t = vkg_input(rg->g, next_name(rg, "in", name, sizeof name), VKG_F32, s->ndim, s->d);
    float *data = malloc((size_t)shape_numel(s) * sizeof *data);
    if (t == VKG_NONE || !data) {
        free(data);
        return VKG_NONE;
    }
    vkg_rng_fill_normal(&rg->rng, data, (size_t)shape_numel(s), 1.0f);
    rg->inputs[rg->n_inputs] = t;
    rg->input_data[rg->n_inputs] = data;
    rg->input_bytes[rg->n_inputs++] = (size_t)shape_numel(s) * sizeof *data;
    return t;
}

/* Token ids in [-1, V], so both ends fall outside the table sometimes. */
static vkg_tensor new_ids(random_graph *rg, const rg_shape *s, int V) {
    if (rg->n_inputs >= RG_MAX_INPUTS) return VKG_NONE;
    char name[32];
    vkg_tensor t = vkg_input(rg->g, next_name(rg, "ids", name, sizeof name), VKG_I32, s->ndim, s->d);
    int32_t *ids = malloc((size_t)shape_numel(s) * sizeof *ids);
    if (t == VKG_NONE || !ids) {
        free(ids);
        return VKG_NONE;
    }
    for (int64_t i = 0; i < shape_numel(s); i++) ids[i] = chance(rg, 15) ? (chance(rg, 50) ? -1 : V) : rnd(rg, V);
    rg->inputs[rg->n_inputs] = t;
    rg->input_data[rg->n_inputs] = ids;
    rg->input_bytes[rg->n_inputs++] = (size_t)shape_numel(s) * sizeof *ids;
    return t;
}

typedef enum fill_kind { FILL_NORMAL, FILL_BOOL, FILL_ADDITIVE } fill_kind;

static vkg_tensor new_constant(random_graph *rg, const rg_shape *s, fill_kind fill, float std) {
    if (rg->n_constants >= RG_MAX_CONSTANTS) return VKG_NONE;
    size_t n = (size_t)shape_numel(s);
    float *data = malloc(n * sizeof *data);
    if (!data) return VKG_NONE;
    if (fill == FILL_NORMAL) vkg_rng_fill_normal(&rg->rng, data, n, std);
    for (size_t i = 0; fill == FILL_BOOL && i < n; i++) data[i] = chance(rg, 30) ? 0.0f : 1.0f;
    for (size_t i = 0; fill == FILL_ADDITIVE && i < n; i++) data[i] = chance(rg, 25) ? -30.0f : 2.0f * vkg_rng_normal(&rg->rng);
    /* Now and then a whole last-axis row of a boolean mask blocks everything. */
    if (fill == FILL_BOOL && chance(rg, 25))
        for (int64_t j = 0; j < s->d[s->ndim - 1]; j++) data[j] = 0.0f;
    rg->constant_data[rg->n_constants++] = data;
    char name[32];
    return vkg_constant(rg->g, next_name(rg, "w", name, sizeof name), VKG_F32, s->ndim, s->d, data);
}

/* A new index holding a value in [0, max_value] (the caller checked there is room for one). */
static vkg_tensor new_index(random_graph *rg, int max_value) {
    char name[32];
    vkg_tensor t = vkg_index(rg->g, next_name(rg, "pos", name, sizeof name));
    rg->indices[rg->n_indices] = t;
    rg->index_values[rg->n_indices++] = rnd(rg, max_value + 1);
    return t;
}

/* An existing index whose value is at most max_value, or a new one. */
static vkg_tensor get_index(random_graph *rg, int max_value) {
    for (int i = 0; i < rg->n_indices; i++)
        if (rg->index_values[i] <= max_value && chance(rg, 70)) return rg->indices[i];
    return rg->n_indices < RG_MAX_INDICES ? new_index(rg, max_value) : VKG_NONE;
}

/* ---- operands ------------------------------------------------------------------------------ */

/* A pool tensor of at least min_ndim dimensions: usually one of the newest three. */
static vkg_tensor pick(random_graph *rg, int min_ndim) {
    for (int tries = 0; tries < 24 && rg->n_pool > 0; tries++) {
        int recent = rg->n_pool < 3 ? rg->n_pool : 3;
        vkg_tensor t = chance(rg, 55) ? rg->pool[rg->n_pool - 1 - rnd(rg, recent)] : rg->pool[rnd(rg, rg->n_pool)];
        if (shape_of(rg, t).ndim >= min_ndim) return t;
    }
    return VKG_NONE;
}

/* numpy broadcasting of a and b; 0 when they do not broadcast. */
static int broadcast(const rg_shape *a, const rg_shape *b, rg_shape *out) {
    out->ndim = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < out->ndim; i++) {
        int ia = a->ndim - out->ndim + i, ib = b->ndim - out->ndim + i;
        int64_t da = ia >= 0 ? a->d[ia] : 1, db = ib >= 0 ? b->d[ib] : 1;
        if (da != db && da != 1 && db != 1) return 0;
        out->d[i] = da > db ? da : db;
    }
    return 1;
}

/* A shape that broadcasts with s: leading dimensions dropped, some set to 1, and (when widen)
 * sometimes a new leading dimension or a size-1 dimension of s grown. */
static rg_shape broadcast_partner(random_graph *rg, const rg_shape *s, int widen) {
    rg_shape b = *s;
    if (b.ndim > 1 && chance(rg, 35)) {
        int drop = 1 + rnd(rg, b.ndim - 1);
        memmove(b.d, b.d + drop, sizeof(int64_t) * (size_t)(b.ndim - drop));
        b.ndim -= drop;
    }
    for (int i = 0; i < b.ndim; i++)
        if (chance(rg, 30)) b.d[i] = 1;
        else if (widen && b.d[i] == 1 && chance(rg, 30)) b.d[i] = 2 + rnd(rg, 3);
    if (widen && b.ndim < VKG_MAX_DIMS && chance(rg, 15)) {
        memmove(b.d + 1, b.d, sizeof(int64_t) * (size_t)b.ndim);
        b.d[0] = 2 + rnd(rg, 2);
        b.ndim++;
    }
    return b;
}

/* ---- ops ----------------------------------------------------------------------------------- */

/* 1 when a (with flags) times b fits; *out gets the result's shape. */
static int matmul_fits(const rg_shape *a, const rg_shape *b, unsigned flags, rg_shape *out) {
    if (a->ndim < 2 || b->ndim < 2) return 0;
    int ta = (flags & VKG_TRANSPOSE_A) != 0, tb = (flags & VKG_TRANSPOSE_B) != 0;
    int64_t M = a->d[a->ndim - 2 + ta], Ka = a->d[a->ndim - 1 - ta];
    int64_t Kb = b->d[b->ndim - 2 + tb], N = b->d[b->ndim - 1 - tb];
    rg_shape ba = *a, bb = *b;
    ba.ndim -= 2;
    bb.ndim -= 2;
    if (Ka != Kb || !broadcast(&ba, &bb, out) || out->ndim > 2) return 0;
    out->d[out->ndim++] = M;
    out->d[out->ndim++] = N;
    return shape_numel(out) <= RG_MAX_NUMEL;
}

static vkg_tensor gen_matmul(random_graph *rg, vkg_tensor a, int allow_pool_b) {
    if (a == VKG_NONE) return VKG_NONE;
    rg_shape sa = shape_of(rg, a), out;
    unsigned flags = (unsigned)rnd(rg, 4);
    int ta = (flags & VKG_TRANSPOSE_A) != 0, tb = (flags & VKG_TRANSPOSE_B) != 0;
    int64_t K = sa.d[sa.ndim - 1 - ta];
    vkg_tensor b = VKG_NONE;
    if (allow_pool_b && chance(rg, 40)) { /* an activation times an activation, as Q K^T */
        for (int tries = 0; tries < 16 && b == VKG_NONE; tries++) {
            vkg_tensor cand = rg->pool[rnd(rg, rg->n_pool)];
            rg_shape sb = shape_of(rg, cand);
            if (matmul_fits(&sa, &sb, flags, &out)) b = cand;
        }
    }
    if (b == VKG_NONE) { /* a weight, shared over the batch or with batch dimensions of its own */
        rg_shape sb = {2, {0}};
        if (sa.ndim > 2 && chance(rg, 30)) {
            sb = broadcast_partner(rg, &(rg_shape){sa.ndim - 2, {sa.d[0], sa.d[1]}}, 0);
            sb.ndim += 2;
        }
        int64_t N = small_dim(rg);
        sb.d[sb.ndim - 2] = tb ? N : K;
        sb.d[sb.ndim - 1] = tb ? K : N;
        if (!matmul_fits(&sa, &sb, flags, &out)) return VKG_NONE;
        b = new_constant(rg, &sb, FILL_NORMAL, 1.0f / sqrtf((float)K));
    }
    rg_shape sb = shape_of(rg, b);
    int64_t N = sb.d[sb.ndim - 1 - tb];
    vkg_tensor bias = VKG_NONE;
    if (chance(rg, 35)) bias = new_constant(rg, &(rg_shape){1, {N}}, FILL_NORMAL, 0.5f);
    return vkg_matmul(rg->g, a, b, bias, flags);
}

static vkg_tensor gen_binary(random_graph *rg, int mul) {
    vkg_tensor a = pick(rg, 1), b = VKG_NONE;
    if (a == VKG_NONE) return VKG_NONE;
    rg_shape sa = shape_of(rg, a), out;
    if (chance(rg, 10)) {
        b = a; /* x + x: one tensor in two operand slots */
    } else if (chance(rg, 45)) {
        for (int tries = 0; tries < 16 && b == VKG_NONE; tries++) {
            vkg_tensor cand = rg->pool[rnd(rg, rg->n_pool)];
            rg_shape sc = shape_of(rg, cand);
            if (broadcast(&sa, &sc, &out) && shape_numel(&out) <= RG_MAX_NUMEL) b = cand;
        }
    }
    if (b == VKG_NONE) {
        rg_shape sb = broadcast_partner(rg, &sa, 1);
        if (!broadcast(&sa, &sb, &out) || shape_numel(&out) > RG_MAX_NUMEL) sb = sa;
        b = mul ? new_constant(rg, &sb, FILL_NORMAL, 0.7f) : (chance(rg, 50) ? new_input(rg, &sb) : new_constant(rg, &sb, FILL_NORMAL, 1.0f));
    }
    if (chance(rg, 50)) {
        vkg_tensor t = a;
        a = b;
        b = t;
    }
    return mul ? vkg_mul(rg->g, a, b) : vkg_add(rg->g, a, b);
}

/* [scale] -> mask (causal, boolean or additive) -> [scale] -> softmax, in either order, with
 * positive scales so that masked entries stay -inf.  Sometimes the masked scores feed a second
 * softmax too, which keeps the mask out of any fusion. */
static vkg_tensor gen_attention(random_graph *rg) {
    int kind = rnd(rg, 4); /* 0 causal, 1 bool, 2 additive, 3 none */
    vkg_tensor x = pick(rg, kind == 0 ? 2 : 1);
    if (x == VKG_NONE) return VKG_NONE;
    static const float scales[] = {0.5f, 0.125f, 2.0f, 0.35f};
    int has_scale = chance(rg, 60), scale_first = kind == 3 || chance(rg, 50);
    float s = scales[rnd(rg, 4)];
    vkg_tensor t = x;
    if (has_scale && scale_first) t = vkg_scale(rg->g, t, s);
    if (kind == 0) {
        vkg_tensor dyn = chance(rg, 40) ? get_index(rg, 3) : VKG_NONE;
        t = chance(rg, 30) ? vkg_mask_causal_window(rg->g, t, rnd(rg, 5) - 2, dyn, 1 + (uint32_t)rnd(rg, 4))
                           : vkg_mask_causal(rg->g, t, rnd(rg, 5) - 2, dyn);
    } else if (kind == 1 || kind == 2) {
        rg_shape sx = shape_of(rg, x), sm = broadcast_partner(rg, &sx, 0);
        t = vkg_mask(rg->g, t, new_constant(rg, &sm, kind == 1 ? FILL_BOOL : FILL_ADDITIVE, 0.0f),
                     kind == 1 ? VKG_MASK_BOOL : VKG_MASK_ADDITIVE);
    }
    if (has_scale && !scale_first) t = vkg_scale(rg->g, t, s);
    if (kind != 3 && chance(rg, 12)) pool_add(rg, vkg_softmax(rg->g, t));
    return vkg_softmax(rg->g, t);
}

/* x @ W1 (+ b1) -> gelu -> @ W2 -> + x: a transformer MLP with its residual. */
static vkg_tensor gen_mlp(random_graph *rg) {
    vkg_tensor x = pick(rg, 2);
    if (x == VKG_NONE) return VKG_NONE;
    rg_shape sx = shape_of(rg, x);
    int64_t C = sx.d[sx.ndim - 1], H = small_dim(rg);
    if (shape_numel(&sx) / C * H > RG_MAX_NUMEL) return VKG_NONE;
    vkg_tensor w1 = new_constant(rg, &(rg_shape){2, {C, H}}, FILL_NORMAL, 1.0f / sqrtf((float)C));
    vkg_tensor b1 = new_constant(rg, &(rg_shape){1, {H}}, FILL_NORMAL, 0.5f);
    vkg_tensor h = chance(rg, 50) ? vkg_matmul(rg->g, x, w1, b1, 0) : vkg_add(rg->g, vkg_matmul(rg->g, x, w1, VKG_NONE, 0), b1);
    if (chance(rg, 40)) { /* gated: swiglu(x @ Wg, h), fused into h's matmul unless h has other readers */
        vkg_tensor wg = new_constant(rg, &(rg_shape){2, {C, H}}, FILL_NORMAL, 1.0f / sqrtf((float)C));
        h = vkg_swiglu(rg->g, vkg_matmul(rg->g, x, wg, VKG_NONE, 0), h);
    } else {
        h = vkg_gelu(rg->g, h);
    }
    vkg_tensor w2 = new_constant(rg, &(rg_shape){2, {H, C}}, FILL_NORMAL, 1.0f / sqrtf((float)H));
    vkg_tensor o = vkg_matmul(rg->g, h, w2, VKG_NONE, 0);
    return chance(rg, 50) ? vkg_add(rg->g, o, x) : vkg_add(rg->g, x, o);
}

static vkg_tensor gen_layernorm(random_graph *rg) {
    vkg_tensor x = pick(rg, 1);
    if (x == VKG_NONE) return VKG_NONE;
    rg_shape sx = shape_of(rg, x);
    rg_shape sc = {1, {sx.d[sx.ndim - 1]}};
    vkg_tensor gamma = chance(rg, 60) ? new_constant(rg, &sc, FILL_NORMAL, 1.0f) : VKG_NONE;
    vkg_tensor beta = chance(rg, 60) ? new_constant(rg, &sc, FILL_NORMAL, 1.0f) : VKG_NONE;
    /* eps bounds how much a row of nearly equal values magnifies float rounding (1 / sqrt(eps)),
     * so the comparison with the double-precision reference stays meaningful */
    if (chance(rg, 40)) return vkg_rms_norm(rg->g, x, gamma, 1e-2f);
    return vkg_layernorm(rg->g, x, gamma, beta, 1e-2f);
}

/* Rotary embedding of x [.., T, D] (D even, 2 to 4 dimensions) over a table of T + 8 positions,
 * at offset 0 .. 3 plus a runtime index of at most 3; or (3 or 4 dimensions) some of the heads of
 * axis -3 rotated, the rest copied, with a runtime index or a position per row (some outside the
 * table). */
static vkg_tensor gen_rope(random_graph *rg) {
    vkg_tensor x = pick(rg, 2);
    if (x == VKG_NONE) return VKG_NONE;
    rg_shape sx = shape_of(rg, x);
    const int64_t D = sx.d[sx.ndim - 1], T = sx.d[sx.ndim - 2];
    if (sx.ndim > 4 || D % 2) return VKG_NONE;
    vkg_tensor table = new_constant(rg, &(rg_shape){2, {T + 8, D}}, FILL_NORMAL, 1.0f);
    if (table == VKG_NONE) return VKG_NONE;
    if (sx.ndim >= 3 && chance(rg, 40)) {
        const int64_t rotated = 1 + rnd(rg, (int)sx.d[sx.ndim - 3]);
        if (chance(rg, 50))
            return vkg_rope_heads(rg->g, x, table, rnd(rg, 4), VKG_NONE, new_ids(rg, &(rg_shape){1, {T}}, (int)T + 5),
                                  rotated);
        return vkg_rope_heads(rg->g, x, table, rnd(rg, 4), chance(rg, 50) ? get_index(rg, 3) : VKG_NONE, VKG_NONE,
                              rotated);
    }
    vkg_tensor dyn = chance(rg, 50) ? get_index(rg, 3) : VKG_NONE;
    return vkg_rope(rg->g, x, table, rnd(rg, 4), dyn);
}

static vkg_tensor gen_reshape(random_graph *rg) {
    vkg_tensor x = pick(rg, 1);
    if (x == VKG_NONE) return VKG_NONE;
    rg_shape sx = shape_of(rg, x);
    int64_t rest = shape_numel(&sx), shape[VKG_MAX_DIMS];
    int ndim = 1 + rnd(rg, VKG_MAX_DIMS);
    for (int i = 0; i < ndim - 1; i++) {
        int64_t divisors[64];
        int n = 0;
        for (int64_t d = 1; d <= rest && n < 64; d++)
            if (rest % d == 0) divisors[n++] = d;
        shape[i] = divisors[rnd(rg, n)];
        rest /= shape[i];
    }
    shape[ndim - 1] = rest;
    if (chance(rg, 30)) shape[rnd(rg, ndim)] = -1;
    return vkg_reshape(rg->g, x, ndim, shape);
}

static vkg_tensor gen_permute(random_graph *rg) {
    vkg_tensor x = pick(rg, 2);
    if (x == VKG_NONE) return VKG_NONE;
    int nd = shape_of(rg, x).ndim;
    if (chance(rg, 30)) return vkg_transpose(rg->g, x, rnd(rg, nd), rnd(rg, nd) - nd);
    int axes[VKG_MAX_DIMS];
    for (int i = 0; i < nd; i++) axes[i] = i;
    for (int i = nd - 1; i > 0; i--) {
        int j = rnd(rg, i + 1), t = axes[i];
        axes[i] = axes[j];
        axes[j] = t;
    }
    return vkg_permute(rg->g, x, axes);
}

static vkg_tensor gen_slice(random_graph *rg) {
    vkg_tensor x = pick(rg, 1);
    if (x == VKG_NONE) return VKG_NONE;
    rg_shape sx = shape_of(rg, x);
    int axis = rnd(rg, sx.ndim);
    int64_t len = 1 + rnd(rg, (int)sx.d[axis]);
    int64_t start = rnd(rg, (int)(sx.d[axis] - len + 1));
    return vkg_slice(rg->g, x, chance(rg, 20) ? axis - sx.ndim : axis, start, len);
}

static vkg_tensor gen_concat(random_graph *rg) {
    vkg_tensor a = pick(rg, 1), b = VKG_NONE;
    if (a == VKG_NONE) return VKG_NONE;
    rg_shape sa = shape_of(rg, a);
    int axis = rnd(rg, sa.ndim);
    if (chance(rg, 30)) b = a;
    for (int tries = 0; tries < 12 && b == VKG_NONE; tries++) {
        vkg_tensor cand = rg->pool[rnd(rg, rg->n_pool)];
        rg_shape sc = shape_of(rg, cand);
        int fits = sc.ndim == sa.ndim;
        for (int i = 0; fits && i < sa.ndim; i++) fits = i == axis || sc.d[i] == sa.d[i];
        if (fits) b = cand;
    }
    if (b == VKG_NONE) {
        rg_shape sb = sa;
        sb.d[axis] = 1 + rnd(rg, 4);
        b = new_input(rg, &sb);
    }
    rg_shape sb = shape_of(rg, b);
    if (shape_numel(&sa) + shape_numel(&sb) > RG_MAX_NUMEL) return VKG_NONE;
    return chance(rg, 50) ? vkg_concat(rg->g, a, b, axis) : vkg_concat(rg->g, b, a, axis);
}

static vkg_tensor gen_embedding(random_graph *rg) {
    int V = 2 + rnd(rg, 9);
    int64_t C = small_dim(rg);
    rg_shape ids = chance(rg, 50) ? (rg_shape){1, {1 + rnd(rg, 6)}} : (rg_shape){2, {1 + rnd(rg, 3), 1 + rnd(rg, 4)}};
    vkg_tensor table = new_constant(rg, &(rg_shape){2, {V, C}}, FILL_NORMAL, 1.0f);
    return vkg_embedding(rg->g, table, new_ids(rg, &ids, V));
}

/* x [R, G, A, D] as the rows of a decode step into a new state [R G + extra, A, S, D]: row r at
 * the position a new index of its own holds (R indices made one after another). */
static vkg_tensor gen_write_rows(random_graph *rg, vkg_tensor x) {
    const rg_shape sx = shape_of(rg, x);
    const int R = (int)sx.d[0];
    const rg_shape ss = {4, {sx.d[0] * sx.d[1] + rnd(rg, 3), sx.d[2], 1 + rnd(rg, 5), sx.d[3]}};
    if (rg->n_indices + R > RG_MAX_INDICES || shape_numel(&ss) > RG_MAX_NUMEL) return VKG_NONE;
    char name[32];
    vkg_tensor state = vkg_state(rg->g, next_name(rg, "state", name, sizeof name), ss.ndim, ss.d);
    rg->states[rg->n_states++] = state;
    vkg_tensor first = new_index(rg, (int)ss.d[2] - 1);
    for (int r = 1; r < R; r++) new_index(rg, (int)ss.d[2] - 1);
    return vkg_write_rows(rg->g, state, x, first, R);
}

/* x written into a new state at a static, runtime or mixed position, sometimes followed by a
 * second write, or (4-d x, now and then) as a decode step's rows each at its own position; the
 * state is then read through the returned handle. */
static vkg_tensor gen_write_at(random_graph *rg) {
    vkg_tensor x = pick(rg, 1);
    if (x == VKG_NONE || rg->n_states >= RG_MAX_STATES) return VKG_NONE;
    if (shape_of(rg, x).ndim == 4 && chance(rg, 40)) return gen_write_rows(rg, x);
    rg_shape sx = shape_of(rg, x), ss = sx;
    int axis = rnd(rg, sx.ndim), extra = 1 + rnd(rg, 4);
    ss.d[axis] += extra;
    if (shape_numel(&ss) > RG_MAX_NUMEL) return VKG_NONE;
    char name[32];
    vkg_tensor state = vkg_state(rg->g, next_name(rg, "state", name, sizeof name), ss.ndim, ss.d);
    rg->states[rg->n_states++] = state;
    vkg_tensor dyn = chance(rg, 50) ? get_index(rg, extra) : VKG_NONE;
    int value = 0;
    for (int i = 0; i < rg->n_indices; i++)
        if (rg->indices[i] == dyn) value = rg->index_values[i];
    vkg_tensor w = vkg_write_at(rg->g, state, x, axis, rnd(rg, extra - value + 1), dyn);
    vkg_tensor x2 = chance(rg, 30) ? new_input(rg, &sx) : VKG_NONE;
    if (x2 != VKG_NONE) w = vkg_write_at(rg->g, w, x2, axis, rnd(rg, extra + 1), VKG_NONE);
    return w;
}

static vkg_tensor gen_unary(random_graph *rg, int which) {
    static const float scales[] = {0.5f, 2.0f, -1.5f, 0.125f, 3.0f, -0.25f};
    vkg_tensor x = pick(rg, 1);
    if (x == VKG_NONE) return VKG_NONE;
    switch (which) {
    case 0: return vkg_scale(rg->g, x, scales[rnd(rg, 6)]);
    case 1: { /* one of the gated activations */
        vkg_tensor (*const gated[4])(vkg_graph *, vkg_tensor) = {vkg_gelu, vkg_gelu_erf, vkg_quick_gelu, vkg_silu};
        return gated[rnd(rg, 4)](rg->g, x);
    }
    case 2: return vkg_relu(rg->g, x);
    default: return vkg_copy(rg->g, x);
    }
}

static vkg_tensor gen_op(random_graph *rg) {
    static const int weights[] = {14, 10, 5, 5, 5, 4, 2, 11, 5, 6, 7, 7, 6, 5, 3, 4, 4};
    int total = 0, r;
    for (size_t i = 0; i < sizeof weights / sizeof weights[0]; i++) total += weights[i];
    r = rnd(rg, total);
    int op = 0;
    while (r >= weights[op]) r -= weights[op++];
    switch (op) {
    case 0: return gen_matmul(rg, pick(rg, 2), 1);
    case 1: return gen_binary(rg, 0);
    case 2: return gen_binary(rg, 1);
    case 3: case 4: case 5: case 6: return gen_unary(rg, op - 3);
    case 7: return gen_attention(rg);
    case 8: return gen_mlp(rg);
    case 9: return gen_layernorm(rg);
    case 10: return gen_reshape(rg);
    case 11: return gen_permute(rg);
    case 12: return gen_slice(rg);
    case 13: return gen_concat(rg);
    case 14: return gen_embedding(rg);
    case 15: return gen_write_at(rg);
    default: return gen_rope(rg);
    }
}

/* A node may be an output when it is computed, not a write into a state, not one already. */
static int output_ok(const random_graph *rg, vkg_tensor t) {
    const vkg_node *n = &rg->g->nodes[t];
    return n->op != VKG_OP_INPUT && n->op != VKG_OP_CONSTANT && n->op != VKG_OP_STATE && n->op != VKG_OP_WRITE_AT &&
           !n->output_name;
}

static int read_by_any(const random_graph *rg, vkg_tensor t) {
    for (int i = t + 1; i < rg->g->n_nodes; i++)
        for (int s = 0; s < VKG_MAX_SRC; s++)
            if (rg->g->nodes[i].src[s] == t) return 1;
    return 0;
}

static void add_output(random_graph *rg, vkg_tensor t) {
    char name[32];
    if (rg->n_outputs >= RG_MAX_OUTPUTS) return;
    if (!output_ok(rg, t)) t = vkg_copy(rg->g, t);
    if (vkg_output(rg->g, next_name(rg, "out", name, sizeof name), t) == VKG_OK) rg->outputs[rg->n_outputs++] = t;
}

int random_graph_build(random_graph *rg, uint64_t seed, int n_ops) {
    memset(rg, 0, sizeof *rg);
    vkg_rng_seed(&rg->rng, seed);
    rg->g = vkg_graph_new();
    if (!rg->g) return -1;
    int n_start = 1 + rnd(rg, 2);
    for (int i = 0; i < n_start; i++) {
        rg_shape s = random_shape(rg, i == 0 ? 2 : 1);
        pool_add(rg, new_input(rg, &s));
    }
    for (int i = 0; i < n_ops && vkg_graph_status(rg->g) == VKG_OK; i++) {
        vkg_tensor t = gen_op(rg);
        if (t == VKG_NONE && vkg_graph_status(rg->g) == VKG_OK) { /* nothing fitted: a fresh operand */
            rg_shape s = random_shape(rg, 1 + rnd(rg, 2));
            t = new_input(rg, &s);
        }
        pool_add(rg, t);
    }
    /* The newest tensor, then up to three others: mostly tensors nothing reads yet (so most of
     * the graph stays alive, while the sinks left out are dead code), sometimes one that later
     * ops also read. */
    if (vkg_graph_status(rg->g) == VKG_OK) {
        add_output(rg, rg->pool[rg->n_pool - 1]);
        int extra = 1 + rnd(rg, 3);
        for (int i = 0; i < extra; i++) {
            vkg_tensor t = rg->pool[rnd(rg, rg->n_pool)];
            for (int tries = 0; tries < 8 && !chance(rg, 25) && read_by_any(rg, t); tries++)
                t = rg->pool[rnd(rg, rg->n_pool)];
            if (output_ok(rg, t)) add_output(rg, t);
        }
    }
    if (vkg_graph_status(rg->g) != VKG_OK) {
        fprintf(stderr, "random graph %llu: the builder refused a call: %s\n", (unsigned long long)seed,
                vkg_graph_error(rg->g));
        return -1;
    }
    return 0;
}

void random_graph_free(random_graph *rg) {
    for (int i = 0; i < rg->n_inputs; i++) free(rg->input_data[i]);
    for (int i = 0; i < rg->n_constants; i++) free(rg->constant_data[i]);
    vkg_graph_free(rg->g);
    memset(rg, 0, sizeof *rg);
}

void random_graph_ref_inputs(const random_graph *rg, ref_inputs *in) {
    for (int i = 0; i < rg->n_inputs; i++) ref_inputs_set(in, rg->inputs[i], rg->input_data[i]);
    for (int i = 0; i < rg->n_indices; i++) ref_inputs_set_index(in, rg->indices[i], rg->index_values[i]);
}
