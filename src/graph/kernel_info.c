/* Facts about each kernel family that the compiler, the dumps and both executors share, read
 * from graph/kernels.def. */
#include "graph/plan.h"

typedef struct binding_info {
    const char *name;
    int writes;
    vkg_binding_elem elem;
} binding_info;

enum { VKG_READ = 0, VKG_WRITE = 1 };

static const struct {
    const char *name;
    int bindings;
    uint32_t params_bytes;
    binding_info bind[VKG_MAX_BINDINGS];
} kernel_info[] = {
#define VKG_BIND(name, access, elem) {#name, VKG_##access, VKG_ELEM_##elem}
#define VKG_KERNEL(ENUM, name, n_bindings, units, cost, ...) \
    [VKG_KERNEL_##ENUM] = {#name, n_bindings, sizeof(vkg_##name##_params), {__VA_ARGS__}},
#include "graph/kernels.def"
};
_Static_assert(sizeof kernel_info / sizeof kernel_info[0] == VKG_KERNEL_COUNT, "one entry per kernel family");

/* Each row's n_bindings is the length of its binding list, and fits the step's slots. */
#define VKG_KERNEL(ENUM, name, n_bindings, units, cost, ...)                                            \
    _Static_assert(sizeof((binding_info[]){__VA_ARGS__}) / sizeof(binding_info) == n_bindings,         \
                   #name ": n_bindings is not the length of its binding list");                         \
    _Static_assert(n_bindings <= VKG_MAX_BINDINGS, #name ": more bindings than VKG_MAX_BINDINGS");
#include "graph/kernels.def"
#undef VKG_BIND

static int known(vkg_kernel k) { return k >= 0 && k < VKG_KERNEL_COUNT; }
static int known_slot(vkg_kernel k, int slot) { return known(k) && slot >= 0 && slot < kernel_info[k].bindings; }

const char *vkg_kernel_name(vkg_kernel k) { return known(k) ? kernel_info[k].name : "?"; }
int vkg_kernel_binding_count(vkg_kernel k) { return known(k) ? kernel_info[k].bindings : 0; }
uint32_t vkg_kernel_params_bytes(vkg_kernel k) { return known(k) ? kernel_info[k].params_bytes : 0; }

/* "-" for a slot the family does not have. */
const char *vkg_kernel_binding_name(vkg_kernel k, int slot) {
    return known_slot(k, slot) ? kernel_info[k].bind[slot].name : known(k) ? "-" : "?";
}
int vkg_kernel_binding_writes(vkg_kernel k, int slot) { return known_slot(k, slot) && kernel_info[k].bind[slot].writes; }
vkg_binding_elem vkg_kernel_binding_elem(vkg_kernel k, int slot) {
    return known_slot(k, slot) ? kernel_info[k].bind[slot].elem : VKG_ELEM_F32;
}
