/* The lesson's building blocks as graphs (attention, multi-head attention, row-wise dot products),
 * and running a graph on a device. */
#include "vkgraph_lesson.h"

#include "base/error.h"

#include <math.h>

vkg_tensor vkg_lesson_attention(vkg_graph *g, vkg_tensor q, vkg_tensor k, vkg_tensor v, vkg_tensor mask,
                                vkg_tensor *weights) {
    int64_t shape[VKG_MAX_DIMS];
    int nd = vkg_tensor_shape(g, q, shape);
    float d_k = nd > 0 ? (float)shape[nd - 1] : 1.0f;
    /* scores = Q @ K^T / sqrt(d_k) */
    vkg_tensor scores = vkg_scale(g, vkg_matmul(g, q, k, VKG_NONE, VKG_TRANSPOSE_B), 1.0f / sqrtf(d_k));
    /* blocked: -inf, so exp gives weight exactly 0 */
    if (mask != VKG_NONE) scores = vkg_mask(g, scores, mask, VKG_MASK_BOOL);
    vkg_tensor w = vkg_softmax(g, scores);
    if (weights) *weights = w;
    return vkg_matmul(g, w, v, VKG_NONE, 0);
}

/* [T, C] -> [H, T, D]: each head's slice of the features, as a view. */
static vkg_tensor split_heads(vkg_graph *g, vkg_tensor m, int64_t T, int64_t H, int64_t D) {
    const int axes[3] = {1, 0, 2};
    return vkg_permute(g, vkg_reshape(g, m, 3, (int64_t[]){T, H, D}), axes);
}

vkg_tensor vkg_lesson_multi_head(vkg_graph *g, vkg_tensor x, vkg_tensor w_q, vkg_tensor w_k, vkg_tensor w_v,
                                 vkg_tensor w_o, int n_heads, vkg_tensor mask) {
    int64_t shape[VKG_MAX_DIMS] = {0, 0};
    vkg_tensor_shape(g, x, shape);
    int64_t T = shape[0], C = shape[1], H = n_heads > 0 ? n_heads : 1, D = C / H;
    vkg_tensor q = split_heads(g, vkg_matmul(g, x, w_q, VKG_NONE, 0), T, H, D);
    vkg_tensor k = split_heads(g, vkg_matmul(g, x, w_k, VKG_NONE, 0), T, H, D);
    vkg_tensor v = split_heads(g, vkg_matmul(g, x, w_v, VKG_NONE, 0), T, H, D);
    vkg_tensor heads = vkg_lesson_attention(g, q, k, v, mask, NULL);      /* all heads at once */
    const int back[3] = {1, 0, 2};
    vkg_tensor joined = vkg_reshape(g, vkg_permute(g, heads, back), 2, (int64_t[]){T, C});
    return vkg_matmul(g, joined, w_o, VKG_NONE, 0);
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
