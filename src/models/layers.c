/* The shared model layers as graph compositions (see layers.h for the shapes and the names). */
#include "models/layers.h"

#include "graph/graph_build.h"

#include <stdarg.h>
#include <stdio.h>

void vkg_layers_prefix(vkg_layers *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b->prefix, sizeof b->prefix, fmt, ap);
    va_end(ap);
}

vkg_tensor vkg_layers_name(vkg_layers *b, vkg_tensor t, const char *what) {
    if (b->unnamed) return t;
    char full[112];
    snprintf(full, sizeof full, "%s%s", b->prefix, what);
    vkg_name(b->g, t, full);
    return t;
}

vkg_tensor vkg_layers_weight(vkg_layers *b, const char *name, vkg_dtype dtype, int64_t d0, int64_t d1,
                             const void *data) {
    char full[112];
    snprintf(full, sizeof full, "%s%s", b->prefix, name);
    const int64_t shape[2] = {d0, d1};
    return vkg_constant(b->g, full, d1 ? dtype : VKG_F32, d1 ? 2 : 1, shape, data);
}

/* "<base><suffix>" into buf: the name of a node on the way to `base`. */
static const char *sub(char *buf, size_t size, const char *base, const char *suffix) {
    snprintf(buf, size, "%s%s", base, suffix);
    return buf;
}

vkg_tensor vkg_layer_linear(vkg_layers *b, vkg_tensor x, vkg_tensor w, vkg_tensor bias, unsigned flags,
                            const char *name) {
    return vkg_layers_name(b, vkg_matmul(b->g, x, w, bias, flags), name);
}

vkg_tensor vkg_layer_layernorm(vkg_layers *b, vkg_tensor x, vkg_tensor gamma, vkg_tensor beta, float eps,
                               const char *name) {
    return vkg_layers_name(b, vkg_layernorm(b->g, x, gamma, beta, eps), name);
}

vkg_tensor vkg_layer_rmsnorm(vkg_layers *b, vkg_tensor x, vkg_tensor gamma, float eps, const char *name) {
    return vkg_layers_name(b, vkg_rms_norm(b->g, x, gamma, eps), name);
}

vkg_tensor vkg_layer_mlp(vkg_layers *b, vkg_tensor x, const vkg_mlp *m) {
    vkg_tensor h;
    if (m->gate_w != VKG_NONE && m->act == vkg_silu) { /* SwiGLU: one step, the up projection's epilogue */
        vkg_tensor gate = vkg_layer_linear(b, x, m->gate_w, m->gate_b, m->flags, m->gate_name);
        vkg_tensor up = vkg_layer_linear(b, x, m->up_w, m->up_b, m->flags, m->up_name);
        h = vkg_layers_name(b, vkg_swiglu(b->g, gate, up), m->gated_name);
    } else if (m->gate_w != VKG_NONE) {
        vkg_tensor gate = vkg_layer_linear(b, x, m->gate_w, m->gate_b, m->flags, m->gate_name);
        gate = vkg_layers_name(b, m->act(b->g, gate), m->act_name);
        vkg_tensor up = vkg_layer_linear(b, x, m->up_w, m->up_b, m->flags, m->up_name);
        h = vkg_layers_name(b, vkg_mul(b->g, gate, up), m->gated_name);
    } else {
        h = vkg_layer_linear(b, x, m->up_w, m->up_b, m->flags, m->up_name);
        h = vkg_layers_name(b, m->act(b->g, h), m->act_name);
    }
    return vkg_layer_linear(b, h, m->down_w, m->down_b, m->flags, m->down_name);
}

vkg_tensor vkg_layer_sdpa(vkg_layers *b, vkg_tensor q, vkg_tensor k, vkg_tensor v, const vkg_sdpa *a,
                          vkg_tensor *probs) {
    vkg_graph *g = b->g;
    vkg_tensor scores = vkg_layers_name(b, vkg_matmul(g, q, k, VKG_NONE, VKG_TRANSPOSE_B), "attn.scores");
    if (a->scale != 1.0f) scores = vkg_layers_name(b, vkg_scale(g, scores, a->scale), "attn.scale");
    if (a->causal)
        scores = vkg_layers_name(b, a->rows ? vkg_mask_causal_rows(g, scores, a->offset, a->dyn_offset, a->rows, a->window,
                                                                   a->one_position)
                                            : vkg_mask_causal_window(g, scores, a->offset, a->dyn_offset, a->window),
                                 "attn.mask");
    if (a->mask != VKG_NONE) scores = vkg_layers_name(b, vkg_mask(g, scores, a->mask, VKG_MASK_BOOL), "attn.mask");
    vkg_tensor p = vkg_layers_name(b, vkg_softmax(g, scores), "attn.softmax");
    if (probs) *probs = p;
    return vkg_layers_name(b, vkg_matmul(g, p, v, VKG_NONE, 0), "attn.heads");
}

/* Columns [col, col + width) of x [.., W]: x itself where they are all of it, else a slice
 * (a view) named `name`. */
static vkg_tensor columns(vkg_layers *b, vkg_tensor x, int64_t col, int64_t width, const char *name) {
    int64_t shape[VKG_MAX_DIMS];
    const int nd = vkg_tensor_shape(b->g, x, shape);
    if (col == 0 && shape[nd - 1] == width) return x;
    return vkg_layers_name(b, vkg_slice(b->g, x, nd - 1, col, width), name);
}

/* Columns [col, col + n * D) of x [.., T, W] as n heads: [.., n, T, D], or, for queries in groups
 * of G > 1 (x without leading dimensions), [n / G, G, T, D].  Views, no copy. */
static vkg_tensor heads_of(vkg_layers *b, vkg_tensor x, int64_t col, int64_t n, int64_t G, int64_t D,
                           const char *which) {
    vkg_graph *g = b->g;
    char what[32];
    int64_t shape[VKG_MAX_DIMS];
    const int nd = vkg_tensor_shape(g, x, shape);
    if (nd < 2) return VKG_NONE;
    x = columns(b, x, col, n * D, sub(what, sizeof what, which, ".slice"));
    int64_t split[VKG_MAX_DIMS];
    int axes[VKG_MAX_DIMS], out_nd;
    if (G > 1) { /* [T, Hkv, G, D] -> [Hkv, G, T, D] */
        const int64_t s[4] = {shape[0], n / G, G, D};
        const int a[4] = {1, 2, 0, 3};
        for (int i = 0; i < 4; i++) split[i] = s[i], axes[i] = a[i];
        out_nd = 4;
    } else { /* [.., T, n, D] -> [.., n, T, D] */
        for (int i = 0; i < nd - 1; i++) split[i] = shape[i], axes[i] = i;
        split[nd - 1] = n;
        split[nd] = D;
        axes[nd - 2] = nd - 1;
        axes[nd - 1] = nd - 2;
        axes[nd] = nd;
        out_nd = nd + 1;
    }
    x = vkg_layers_name(b, vkg_reshape(g, x, out_nd, split), sub(what, sizeof what, which, ".reshape"));
    return vkg_layers_name(b, vkg_permute(g, x, axes), which);
}

/* Heads [.., T, D] rotated (a->rope set), else as they are: row t at position pos + t, or with
 * several sequences' rows (a->rows > 1) at positions[t], every row in one step. */
static vkg_tensor rotated(vkg_layers *b, const vkg_attention *a, vkg_tensor heads, const char *name) {
    if (a->rope == VKG_NONE) return heads;
    if (a->rows > 1) { /* heads [n, T, D] */
        int64_t shape[VKG_MAX_DIMS];
        const int nd = vkg_tensor_shape(b->g, heads, shape);
        return vkg_layers_name(b, vkg_rope_heads(b->g, heads, a->rope, 0, VKG_NONE, *a->positions, shape[nd - 3]), name);
    }
    vkg_tensor pos = a->kv_cache != VKG_NONE ? a->pos : VKG_NONE;
    return vkg_layers_name(b, vkg_rope(b->g, heads, a->rope, 0, pos), name);
}

/* Keys and values kv [2, Hkv, T, D] written into slot `slot` of the cache state
 * [2 slots, Hkv, S, D] (slot s's keys at plane 2s, its values at 2s + 1) at position pos (an
 * index), one step; returns the state after it. */
static vkg_tensor write_block(vkg_layers *b, vkg_tensor state, vkg_tensor kv, int slot, vkg_tensor pos) {
    return vkg_layers_name(b, vkg_write_at_block(b->g, state, kv, 2, 0, pos, 0, 2 * (int64_t)slot),
                           "attn.kv_cache.write");
}

/* Slots [slot, slot + n) of the cache state read back whole (views): one slot as heads
 * [Hkv, S, D], with groups [Hkv, 1, S, D] so that the G query heads of a group broadcast over
 * one key/value head; several (without groups) as [n, Hkv, S, D], a slot apart each. */
static void read_slots(vkg_layers *b, const vkg_attention *a, vkg_tensor state, int slot, int n, vkg_tensor *kh,
                       vkg_tensor *vh) {
    vkg_graph *g = b->g;
    const int64_t Hkv = a->n_kv_head, D = a->head_dim;
    int64_t shape[VKG_MAX_DIMS];
    vkg_tensor_shape(g, state, shape);
    const int64_t slots = shape[0] / 2, S = shape[2];
    const int grouped = a->n_head != a->n_kv_head;
    vkg_tensor blocks = vkg_layers_name(b, vkg_reshape(g, state, 4, (const int64_t[]){slots, 2 * Hkv, S, D}),
                                        "attn.kv_cache.blocks"); /* [slots, 2 Hkv, S, D] */
    if (n != slots) blocks = vkg_layers_name(b, vkg_slice(g, blocks, 0, slot, n), "attn.kv_cache.slots");
    vkg_tensor half[2];
    for (int h = 0; h < 2; h++) {
        vkg_tensor x = vkg_layers_name(b, vkg_slice(g, blocks, 1, h * Hkv, Hkv), h ? "attn.v_cache.slice" : "attn.k_cache.slice");
        if (n == 1)
            x = grouped ? vkg_reshape(g, x, 4, (const int64_t[]){Hkv, 1, S, D}) : vkg_reshape(g, x, 3, (const int64_t[]){Hkv, S, D});
        half[h] = vkg_layers_name(b, x, h ? "attn.v_cache" : "attn.k_cache");
    }
    *kh = half[0], *vh = half[1];
}

/* The run's keys and values as one block [2, Hkv, T, D] for the cache.  Keys next to values in
 * one projection (GPT-2's c_attn, any fused k/v projection) are that block as they are, a view;
 * apart, or with the keys rotated ("attn.k.rope"), their heads are first copied side by side
 * ("attn.kv.concat"). */
static vkg_tensor kv_block(vkg_layers *b, const vkg_attention *a, vkg_tensor k, int64_t k_col, vkg_tensor v,
                           int64_t v_col) {
    vkg_graph *g = b->g;
    const int64_t Hkv = a->n_kv_head, D = a->head_dim, W = Hkv * D;
    int64_t shape[VKG_MAX_DIMS];
    vkg_tensor_shape(g, k, shape);
    const int64_t T = shape[0];
    vkg_tensor kv;
    if (k == v && v_col == k_col + W && a->rope == VKG_NONE) { /* [T, 2W] -> [T, 2, Hkv, D] -> [2, Hkv, T, D] */
        kv = columns(b, k, k_col, 2 * W, "attn.kv.slice");
        kv = vkg_layers_name(b, vkg_reshape(g, kv, 4, (const int64_t[]){T, 2, Hkv, D}), "attn.kv.reshape");
        return vkg_layers_name(b, vkg_permute(g, kv, (const int[]){1, 2, 0, 3}), "attn.kv");
    } /* [Hkv, T, D] twice -> [2 Hkv, T, D] -> [2, Hkv, T, D] */
    vkg_tensor kr = rotated(b, a, heads_of(b, k, k_col, Hkv, 1, D, "attn.k"), "attn.k.rope");
    kv = vkg_concat(g, kr, heads_of(b, v, v_col, Hkv, 1, D, "attn.v"), 0);
    kv = vkg_layers_name(b, kv, "attn.kv.concat");
    return vkg_layers_name(b, vkg_reshape(g, kv, 4, (const int64_t[]){2, Hkv, T, D}), "attn.kv");
}

/* q, k and v side by side in one projection x [T, ..] from column col, as heads [H + 2 Hkv, T, D]
 * with the queries and keys rotated and the values copied beside them, in one step
 * ("attn.qkv.rope"); row t at the attention's position (pos + t), or at positions[t] where
 * positions is given (the rows of several sequences). */
static vkg_tensor rotated_qkv(vkg_layers *b, const vkg_attention *a, vkg_tensor x, int64_t col, vkg_tensor positions) {
    const int64_t H = a->n_head, Hkv = a->n_kv_head;
    vkg_tensor heads = heads_of(b, x, col, H + 2 * Hkv, 1, a->head_dim, "attn.qkv");
    const vkg_tensor pos = a->kv_cache != VKG_NONE && positions == VKG_NONE ? a->pos : VKG_NONE;
    return vkg_layers_name(b, vkg_rope_heads(b->g, heads, a->rope, 0, pos, positions, H + Hkv), "attn.qkv.rope");
}

/* Heads [H + 2 Hkv, T, D] of rotated_qkv as the queries (grouped as heads_of makes them) and the
 * keys and values as one block [2, Hkv, T, D]: views, each where its pointer is not NULL. */
static void split_qkv(vkg_layers *b, const vkg_attention *a, vkg_tensor heads, vkg_tensor *qh, vkg_tensor *kv) {
    vkg_graph *g = b->g;
    const int64_t H = a->n_head, Hkv = a->n_kv_head, D = a->head_dim, G = H / Hkv;
    int64_t shape[VKG_MAX_DIMS];
    vkg_tensor_shape(g, heads, shape);
    const int64_t T = shape[1];
    if (qh) {
        *qh = vkg_layers_name(b, vkg_slice(g, heads, 0, 0, H), "attn.q.slice");
        if (G > 1) *qh = vkg_reshape(g, *qh, 4, (const int64_t[]){Hkv, G, T, D});
        *qh = vkg_layers_name(b, *qh, "attn.q.rope");
    }
    if (kv) {
        *kv = vkg_layers_name(b, vkg_slice(g, heads, 0, H, 2 * Hkv), "attn.kv.slice");
        *kv = vkg_layers_name(b, vkg_reshape(g, *kv, 4, (const int64_t[]){2, Hkv, T, D}), "attn.kv");
    }
}

/* q, k and v of one projection side by side, with rotary embeddings: rotated (the values
 * copied) in one step. */
static int one_projection(const vkg_attention *a, vkg_tensor q, int64_t q_col, vkg_tensor k, int64_t k_col,
                          vkg_tensor v, int64_t v_col) {
    return a->rope != VKG_NONE && q == k && k == v && k_col == q_col + a->n_head * a->head_dim &&
           v_col == k_col + a->n_kv_head * a->head_dim;
}

/* Attention of the query heads qh over kh and vh, back to tokens [.., T, H * D] (the shape of
 * q, shape[nd]); with a cache the causal mask counts from pos (or from each batch entry's index,
 * s->rows). */
static vkg_tensor attend(vkg_layers *b, const vkg_attention *a, vkg_tensor qh, vkg_tensor kh, vkg_tensor vh,
                         const vkg_sdpa *s, int nd, const int64_t *shape, vkg_tensor *probs) {
    vkg_graph *g = b->g;
    const int64_t H = a->n_head, Hkv = a->n_kv_head, D = a->head_dim, G = H / Hkv;
    vkg_tensor p = VKG_NONE;
    vkg_tensor heads = vkg_layer_sdpa(b, qh, kh, vh, s, &p);
    if (probs && G > 1) { /* [Hkv, G, T, S] -> [H, T, S]: the heads in order (a view) */
        int64_t ps[VKG_MAX_DIMS];
        vkg_tensor_shape(g, p, ps);
        const int64_t per_head[3] = {H, ps[2], ps[3]};
        p = vkg_layers_name(b, vkg_reshape(g, p, 3, per_head), "attn.softmax.heads");
    }
    if (probs) *probs = p;
    /* Back to tokens: [.., H, T, D] -> [.., T, H, D] (or [Hkv, G, T, D] -> [T, Hkv, G, D]) -> [.., T, H * D] */
    int axes[VKG_MAX_DIMS], hnd = G > 1 ? 4 : nd + 1;
    int64_t merged[VKG_MAX_DIMS];
    if (G > 1) {
        const int a4[4] = {2, 0, 1, 3};
        for (int i = 0; i < 4; i++) axes[i] = a4[i];
    } else {
        for (int i = 0; i < hnd; i++) axes[i] = i;
        axes[hnd - 3] = hnd - 2;
        axes[hnd - 2] = hnd - 3;
    }
    for (int i = 0; i < nd - 1; i++) merged[i] = shape[i];
    merged[nd - 1] = H * D;
    vkg_tensor tokens = vkg_layers_name(b, vkg_permute(g, heads, axes), "attn.merge.permute");
    return vkg_layers_name(b, vkg_reshape(g, tokens, nd, merged), "attn.merge");
}

static vkg_sdpa sdpa_of(const vkg_attention *a, vkg_tensor dyn_offset) {
    return (vkg_sdpa){.scale = a->scale, .causal = a->causal, .window = a->window, .dyn_offset = dyn_offset,
                      .mask = a->mask};
}

/* Rows [r, r + n) of x [T, ..]. */
static vkg_tensor rows_of(vkg_layers *b, vkg_tensor x, int64_t r, int64_t n, const char *name) {
    return vkg_layers_name(b, vkg_slice(b->g, x, 0, r, n), name);
}

/* Every sequence its one row, sequence r in slot r (a decode step), with planes [0, planes) of the
 * cache state within the binding every Vulkan device has (maxStorageBufferRange is at least 2^27
 * bytes): then one step can reach every row's slot.  Larger, a step a row. */
static int decode_rows(vkg_layers *b, const vkg_attention *a, int64_t planes) {
    int64_t shape[VKG_MAX_DIMS];
    vkg_tensor_shape(b->g, a->kv_cache, shape);
    if (planes * shape[1] * shape[2] * shape[3] * (int64_t)sizeof(float) > ((int64_t)1 << 27)) return 0;
    for (int r = 0; r < a->rows; r++)
        if (a->row_tokens[r] != 1 || a->row_slots[r] != r) return 0;
    return 1;
}

/* A decode step's keys and values, every row's written into its slot at its position in one step:
 * kv [2, Hkv, R, D] as [R, 2, Hkv, D] (a view), row r into planes 2r and 2r + 1. */
static vkg_tensor write_rows(vkg_layers *b, const vkg_attention *a, vkg_tensor kv) {
    kv = vkg_layers_name(b, vkg_permute(b->g, kv, (const int[]){2, 0, 1, 3}), "attn.kv.rows");
    return vkg_layers_name(b, vkg_write_rows(b->g, a->kv_cache, kv, a->row_pos[0], a->rows), "attn.kv_cache.write");
}

/* A decode step's attention as one step: the queries [R, Hkv, G, D] (the G heads of a group as
 * rows at the row's one position) against the rows' slots' keys [R, Hkv, S, D] (one view of the
 * cache from slot 0's keys to slot R-1's, a slot apart), each row's mask at its own index. */
static vkg_tensor attend_rows(vkg_layers *b, const vkg_attention *a, vkg_tensor qh, vkg_tensor state) {
    vkg_graph *g = b->g;
    const int R = a->rows;
    const int64_t Hkv = a->n_kv_head, G = a->n_head / Hkv, D = a->head_dim;
    qh = vkg_layers_name(b, vkg_reshape(g, qh, 4, (const int64_t[]){R, Hkv, G, D}), "attn.q");
    vkg_tensor kh, vh;
    read_slots(b, a, state, 0, R, &kh, &vh);
    vkg_sdpa s = sdpa_of(a, a->row_pos[0]);
    s.rows = R;
    s.one_position = G > 1;
    const vkg_tensor heads = vkg_layer_sdpa(b, qh, kh, vh, &s, NULL); /* [R, Hkv, G, D] */
    return vkg_layers_name(b, vkg_reshape(g, heads, 2, (const int64_t[]){R, a->n_head * D}), "attn.rows");
}

/* Several sequences (a->rows > 1), each its rows next to each other: every sequence's keys and
 * values written into its slot first (a later write replaces the state an earlier read would
 * use), then the attention of each over its own slot, stacked again ("attn.rows"; the compiler
 * computes each sequence's rows in place there).  A decode step (decode_rows) takes one step for
 * every row's write (write_rows) and one for every row's attention (attend_rows).  q, k and v of
 * one projection are rotated for every row in one step, each row at its own position
 * (*a->positions); q and k apart (Qwen3's, each through its norm) one step each in a decode
 * step, else a sequence's rows at a time. */
static vkg_tensor attention_rows(vkg_layers *b, const vkg_attention *a, vkg_tensor q, int64_t q_col, vkg_tensor k,
                                 int64_t k_col, vkg_tensor v, int64_t v_col) {
    vkg_graph *g = b->g;
    const int64_t H = a->n_head, D = a->head_dim, W = H * D;
    const int joint = one_projection(a, q, q_col, k, k_col, v, v_col) && a->positions;
    const vkg_tensor all = joint ? rotated_qkv(b, a, q, q_col, *a->positions) : VKG_NONE;
    vkg_attention one = *a;
    one.rows = 0;
    vkg_tensor state = a->kv_cache;
    const int decode = (a->rope == VKG_NONE || a->positions) && decode_rows(b, a, 2 * (int64_t)a->rows);
    if (decode) {
        vkg_tensor kv;
        if (joint) split_qkv(b, a, all, NULL, &kv);
        else kv = kv_block(b, a, k, k_col, v, v_col);
        state = write_rows(b, a, kv);
    }
    for (int r = 0, row = 0; !decode && r < a->rows; row += a->row_tokens[r++]) {
        one.pos = a->row_pos[r];
        const int n = a->row_tokens[r];
        vkg_tensor kv;
        if (joint) {
            split_qkv(b, &one, vkg_layers_name(b, vkg_slice(g, all, 1, row, n), "attn.row.qkv"), NULL, &kv);
        } else { /* k and v sliced once each where they are one tensor (a fused projection) */
            const vkg_tensor kr = rows_of(b, k, row, n, "attn.row.k");
            kv = kv_block(b, &one, kr, k_col, v == k ? kr : rows_of(b, v, row, n, "attn.row.v"), v_col);
        }
        state = write_block(b, state, kv, a->row_slots[r], a->row_pos[r]);
    }
    if (decode && a->mask == VKG_NONE && a->causal) {
        vkg_tensor qh; /* [R, H D] */
        if (a->rope != VKG_NONE) { /* [H, R, D] -> [R, H, D] */
            qh = joint ? vkg_layers_name(b, vkg_slice(g, all, 0, 0, H), "attn.q.slice")
                       : rotated(b, a, heads_of(b, q, q_col, H, 1, D, "attn.q"), "attn.q.rope");
            qh = vkg_layers_name(b, vkg_permute(g, qh, (const int[]){1, 0, 2}), "attn.q.rows");
        } else {
            qh = columns(b, q, q_col, W, "attn.q.slice");
        }
        return attend_rows(b, a, qh, state);
    }
    vkg_tensor out = VKG_NONE;
    for (int r = 0, row = 0; r < a->rows; row += a->row_tokens[r++]) {
        one.pos = a->row_pos[r];
        one.slot = a->row_slots[r];
        const int n = a->row_tokens[r];
        vkg_tensor qh, kh, vh;
        if (joint) {
            split_qkv(b, &one, vkg_layers_name(b, vkg_slice(g, all, 1, row, n), "attn.row.qkv"), &qh, NULL);
        } else {
            const int64_t G = H / a->n_kv_head;
            qh = rotated(b, &one, heads_of(b, rows_of(b, q, row, n, "attn.row.q"), q_col, H, G, D, "attn.q"), "attn.q.rope");
        }
        read_slots(b, &one, state, one.slot, 1, &kh, &vh);
        const vkg_sdpa s = sdpa_of(&one, one.pos);
        const vkg_tensor heads = attend(b, &one, qh, kh, vh, &s, 2, (const int64_t[]){n, W}, NULL);
        out = r == 0 ? heads : vkg_layers_name(b, vkg_concat(g, out, heads, 0), "attn.rows");
    }
    return out;
}

vkg_tensor vkg_layer_attention(vkg_layers *b, const vkg_attention *a, vkg_tensor q, int64_t q_col, vkg_tensor k,
                               int64_t k_col, vkg_tensor v, int64_t v_col, vkg_tensor *probs) {
    vkg_graph *g = b->g;
    if (vkg_graph_status(g) != VKG_OK) return VKG_NONE;
    int64_t shape[VKG_MAX_DIMS];
    const int nd = vkg_tensor_shape(g, q, shape);
    const int64_t H = a->n_head, Hkv = a->n_kv_head, D = a->head_dim, G = Hkv > 0 ? H / Hkv : 0;
    if (H < 1 || Hkv < 1 || D < 1 || H % Hkv) {
        vkg_graph_fail(g, VKG_ERR_SHAPE, "attention: %lld query heads in groups over %lld key/value heads of size "
                       "%lld; the query heads must be a positive multiple of the key/value heads",
                       (long long)H, (long long)Hkv, (long long)D);
        return VKG_NONE;
    }
    if ((G > 1 || a->kv_cache != VKG_NONE || a->rows > 1) && nd != 2) {
        vkg_graph_fail(g, VKG_ERR_SHAPE, "attention: queries %s; grouped heads and a KV cache take the tokens as "
                       "[T, H * D], without leading dimensions", vkg_shape_str(nd, shape, (char[64]){0}, 64));
        return VKG_NONE;
    }
    if (a->rows > 1) {
        if (probs) *probs = VKG_NONE;
        return attention_rows(b, a, q, q_col, k, k_col, v, v_col);
    }
    vkg_tensor qh, kh, vh, kv = VKG_NONE;
    if (one_projection(a, q, q_col, k, k_col, v, v_col))
        split_qkv(b, a, rotated_qkv(b, a, q, q_col, VKG_NONE), &qh, &kv);
    else
        qh = rotated(b, a, heads_of(b, q, q_col, H, G, D, "attn.q"), "attn.q.rope");
    if (a->kv_cache != VKG_NONE) {
        if (kv == VKG_NONE) kv = kv_block(b, a, k, k_col, v, v_col);
        read_slots(b, a, write_block(b, a->kv_cache, kv, a->slot, a->pos), a->slot, 1, &kh, &vh);
    } else {
        if (kv != VKG_NONE) { /* [2, Hkv, T, D] -> [Hkv, T, D] twice */
            const int64_t heads[3] = {Hkv, shape[0], D};
            kh = vkg_layers_name(b, vkg_reshape(g, vkg_slice(g, kv, 0, 0, 1), 3, heads), "attn.k.rope");
            vh = vkg_layers_name(b, vkg_reshape(g, vkg_slice(g, kv, 0, 1, 1), 3, heads), "attn.v");
        } else {
            kh = rotated(b, a, heads_of(b, k, k_col, Hkv, 1, D, "attn.k"), "attn.k.rope");
            vh = heads_of(b, v, v_col, Hkv, 1, D, "attn.v");
        }
        if (G > 1) { /* [Hkv, T, D] -> [Hkv, 1, T, D] */
            const int64_t grouped[4] = {Hkv, 1, shape[0], D};
            kh = vkg_layers_name(b, vkg_reshape(g, kh, 4, grouped), "attn.k.group");
            vh = vkg_layers_name(b, vkg_reshape(g, vh, 4, grouped), "attn.v.group");
        }
    }
    const vkg_sdpa s = sdpa_of(a, a->kv_cache != VKG_NONE ? a->pos : VKG_NONE);
    return attend(b, a, qh, kh, vh, &s, nd, shape, probs);
}

void vkg_layer_attention_output(vkg_layers *b, const vkg_forward_options *o, vkg_forward_graph *gg, int layer,
                                vkg_tensor probs) {
    if (o->attention_layer != VKG_ALL_LAYERS && o->attention_layer != layer) return;
    char name[32];
    snprintf(name, sizeof name, "attention.%d", layer);
    vkg_tensor out = probs;
    if (o->cache_len && o->attention_keys > 0)
        out = vkg_layers_name(b, vkg_slice(b->g, probs, 2, 0, o->attention_keys), "attn.softmax.slice");
    if (vkg_output(b->g, name, out) == VKG_OK) gg->attention[layer] = out;
}

void vkg_layer_forward_inputs(vkg_graph *g, const vkg_forward_options *o, vkg_forward_graph *gg, int n_layer,
                              int64_t n_kv_head, int64_t head_dim, const char *cache_prefix, const char *cache_suffix) {
    const int64_t tokens[1] = {o->tokens};
    gg->ids = vkg_input(g, "ids", VKG_I32, 1, tokens);
    gg->positions = vkg_input(g, "positions", VKG_I32, 1, tokens);
    gg->pos = VKG_NONE;
    if (!o->cache_len) return;
    char name[96];
    if (o->seqs > 1) { /* sequence r's own position in its own slot */
        for (int r = 0; r < o->seqs; r++) {
            snprintf(name, sizeof name, "pos.%d", r);
            gg->row_pos[r] = vkg_index(g, name);
        }
    } else {
        gg->pos = vkg_index(g, "pos");
    }
    /* a batch context's slots share one state a layer: every plan of the context names it */
    const int64_t slots = o->seqs ? o->n_slots : 1;
    const int64_t cache_shape[4] = {2 * slots, n_kv_head, o->cache_len, head_dim};
    for (int i = 0; i < n_layer; i++) {
        if (o->seqs) snprintf(name, sizeof name, "%s%d.%s.slots", cache_prefix, i, cache_suffix);
        else snprintf(name, sizeof name, "%s%d.%s", cache_prefix, i, cache_suffix);
        gg->kv_cache[i] = vkg_state(g, name, 4, cache_shape);
    }
}

vkg_tensor vkg_layer_logit_rows(vkg_layers *b, const vkg_forward_options *o, const vkg_forward_graph *gg,
                                vkg_tensor x) {
    if (o->seqs <= 1)
        return o->all_logits || o->tokens == 1 ? x : vkg_layers_name(b, vkg_slice(b->g, x, 0, o->tokens - 1, 1),
                                                                      "last_position");
    if (!o->seq_tokens) return x; /* one row a sequence */
    vkg_tensor out = VKG_NONE;
    for (int r = 0, row = 0; r < o->seqs; r++) {
        row += gg->seq_tokens[r];
        const vkg_tensor last = rows_of(b, x, row - 1, 1, "last_row");
        out = r == 0 ? last : vkg_layers_name(b, vkg_concat(b->g, out, last, 0), "last_rows");
    }
    return out;
}
