/* The lesson's building blocks as graphs (attention, multi-head attention, row-wise dot products),
 * and running a graph on a device. */
#include "vkgraph_lesson.h"

#include "base/error.h"
#include "models/layers.h"

#include <math.h>

/* The lesson's graphs leave their nodes unnamed: their dumps show the ops. */
vkg_tensor vkg_lesson_attention(vkg_graph *g, vkg_tensor q, vkg_tensor k, vkg_tensor v, vkg_tensor mask,
                                vkg_tensor *weights) {
    int64_t shape[VKG_MAX_DIMS];
    int nd = vkg_tensor_shape(g, q, shape);
    float d_k = nd > 0 ? (float)shape[nd - 1] : 1.0f;
    /* softmax(Q @ K^T / sqrt(d_k)) V, a blocked key at -inf, so that exp gives it weight exactly 0 */
    vkg_layers L = {.g = g, .unnamed = 1};
    const vkg_sdpa a = {.scale = 1.0f / sqrtf(d_k), .dyn_offset = VKG_NONE, .mask = mask};
    return vkg_layer_sdpa(&L, q, k, v, &a, weights);
}

vkg_tensor vkg_lesson_multi_head(vkg_graph *g, vkg_tensor x, vkg_tensor w_q, vkg_tensor w_k, vkg_tensor w_v,
                                 vkg_tensor w_o, int n_heads, vkg_tensor mask) {
    int64_t shape[VKG_MAX_DIMS] = {0, 0};
    vkg_tensor_shape(g, x, shape);
    int64_t C = shape[1], H = n_heads > 0 ? n_heads : 1, D = C / H;
    vkg_layers L = {.g = g, .unnamed = 1};
    vkg_tensor q = vkg_layer_linear(&L, x, w_q, VKG_NONE, 0, NULL);
    vkg_tensor k = vkg_layer_linear(&L, x, w_k, VKG_NONE, 0, NULL);
    vkg_tensor v = vkg_layer_linear(&L, x, w_v, VKG_NONE, 0, NULL);
    /* every head at once; the mask (not causal by rule) blocks what it blocks in each head */
    const vkg_attention a = {.n_head = H, .n_kv_head = H, .head_dim = D, .scale = 1.0f / sqrtf((float)D),
                             .mask = mask, .rope = VKG_NONE, .kv_cache = VKG_NONE, .pos = VKG_NONE};
    vkg_tensor joined = vkg_layer_attention(&L, &a, q, 0, k, 0, v, 0, NULL);
    return vkg_layer_linear(&L, joined, w_o, VKG_NONE, 0, NULL);
}

vkg_tensor vkg_lesson_row_dots(vkg_graph *g, vkg_tensor a, vkg_tensor b) {
    int64_t shape[VKG_MAX_DIMS] = {0, 0};
    vkg_tensor_shape(g, a, shape);
    int64_t rows[3] = {shape[0], 1, shape[1]};
    /* [N, 1, D] @ [N, 1, D]^T = [N, 1, 1]: one 1x1 product per row pair */
    vkg_tensor d = vkg_matmul(g, vkg_reshape(g, a, 3, rows), vkg_reshape(g, b, 3, rows), VKG_NONE, VKG_TRANSPOSE_B);
    return vkg_reshape(g, d, 1, (int64_t[]){shape[0]});
}

void vkg_lesson_run_begin(vkg_lesson_run *r, vkg_device *dev, const vkg_graph *g, vkg_error *err) {
    *r = (vkg_lesson_run){.graph = g, .err = err};
    if (vkg_graph_status(g) != VKG_OK) {
        r->status = vkg_error_set(err, vkg_graph_status(g), "lesson graph: %s", vkg_graph_error(g));
        return;
    }
    vkg_compile_options opts;
    vkg_compile_options_default(&opts);
    vkg_device_compile_options(dev, &opts);
    r->status = vkg_plan_compile(g, &opts, &r->plan, err);
    if (r->status == VKG_OK) r->status = vkg_session_new(dev, r->plan, &r->session, err);
}

void vkg_lesson_run_set(vkg_lesson_run *r, const char *name, const void *data, size_t bytes) {
    if (r->status != VKG_OK) return;
    vkg_tensor t = vkg_find(r->graph, name);
    r->status = t == VKG_NONE ? vkg_error_set(r->err, VKG_ERR_NOT_FOUND, "lesson graph has no input '%s'", name)
                              : vkg_session_set_input(r->session, t, data, bytes, r->err);
}

void vkg_lesson_run_go(vkg_lesson_run *r) {
    if (r->status == VKG_OK) r->status = vkg_session_run(r->session, r->err);
}

void vkg_lesson_run_get(vkg_lesson_run *r, const char *name, float *data, size_t n) {
    if (r->status != VKG_OK) return;
    vkg_tensor t = vkg_find(r->graph, name);
    r->status = t == VKG_NONE ? vkg_error_set(r->err, VKG_ERR_NOT_FOUND, "lesson graph has no output '%s'", name)
                              : vkg_session_get_output(r->session, t, data, n * sizeof *data, r->err);
}

vkg_status vkg_lesson_run_end(vkg_lesson_run *r) {
    vkg_session_free(r->session);
    vkg_plan_free(r->plan);
    r->session = NULL;
    r->plan = NULL;
    return r->status;
}
