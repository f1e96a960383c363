/* Facts about each kernel family that the compiler, the dumps and both executors share. */
#include "graph/plan.h"

static const struct {
    const char *name;
    int bindings;
} kernel_info[VKG_KERNEL_COUNT] = {
    [VKG_KERNEL_MATMUL] = {"matmul", 5},       /* A, B, C, bias, residual  */
    [VKG_KERNEL_BINARY] = {"binary", 3},       /* a, b, out                */
    [VKG_KERNEL_UNARY] = {"unary", 3},         /* in, out, indices         */
    [VKG_KERNEL_SOFTMAX] = {"softmax", 4},     /* in, out, mask, indices   */
    [VKG_KERNEL_LAYERNORM] = {"layernorm", 4}, /* in, out, gamma, beta     */
    [VKG_KERNEL_EMBEDDING] = {"embedding", 3}, /* ids, table, out          */
    [VKG_KERNEL_ATTENTION] = {"attention", 5}, /* q, k, v, out, indices    */
};

const char *vkg_kernel_name(vkg_kernel k) {
    return (k >= 0 && k < VKG_KERNEL_COUNT) ? kernel_info[k].name : "?";
}

int vkg_kernel_binding_count(vkg_kernel k) {
    return (k >= 0 && k < VKG_KERNEL_COUNT) ? kernel_info[k].bindings : 0;
}
