/* The plan: what the compiler produces and both executors run.  Backend-neutral: an ordered list
 * of steps, each a kernel id with its parameter block and the byte ranges of the regions it
 * binds.  The CPU executor and the Vulkan executor run the same steps over the same layout. */
#ifndef VKG_PLAN_H
#define VKG_PLAN_H

#include "vkgraph.h"
#include "graph/graph.h"
#include "graph/kernels.def" /* at file scope: the families' parameter blocks, no rows */

/* The kernel families, one per row of graph/kernels.def. */
typedef enum vkg_kernel {
#define VKG_KERNEL(ENUM, name, n_bindings, units, cost, ...) VKG_KERNEL_##ENUM,
#include "graph/kernels.def"
    VKG_KERNEL_COUNT
} vkg_kernel;

/* What a binding slot of a family holds (graph/kernels.def's VKG_BIND). */
typedef enum vkg_binding_elem {
    VKG_ELEM_F32,
    VKG_ELEM_I32,
    VKG_ELEM_WEIGHT  /* f32, or 16-bit elements where the step's parameters say so */
} vkg_binding_elem;

/* Facts of graph/kernels.def (kernel_info.c).  An unknown kernel or slot gives a name of "?" ("-"
 * for a slot past a known family's last), 0 bindings, no writes, VKG_ELEM_F32, 0 bytes. */
const char *vkg_kernel_name(vkg_kernel k);
int vkg_kernel_binding_count(vkg_kernel k);
const char *vkg_kernel_binding_name(vkg_kernel k, int slot);
int vkg_kernel_binding_writes(vkg_kernel k, int slot);
vkg_binding_elem vkg_kernel_binding_elem(vkg_kernel k, int slot);
/* sizeof its parameter block: what a shader of the family takes as push constants. */
uint32_t vkg_kernel_params_bytes(vkg_kernel k);

/* Where a binding's bytes live.  Region 0 is always the arena of intermediates. */
typedef enum vkg_region_kind {
    VKG_REGION_ARENA = 0,
    VKG_REGION_INPUT,
    VKG_REGION_OUTPUT,
    VKG_REGION_CONSTANT,
    VKG_REGION_STATE,
    VKG_REGION_INDICES   /* the runtime indices, one i32 each */
} vkg_region_kind;

typedef struct vkg_region {
    vkg_region_kind kind;
    vkg_tensor tensor;     /* graph node for inputs, outputs, constants, states; VKG_NONE else */
    uint64_t bytes;
    const void *host;      /* constants: the borrowed host data                              */
    vkg_dtype dtype;       /* the elements as kernels read them                              */
    vkg_dtype host_dtype;  /* constants: the elements of host; f16/bf16 where dtype is f32
                              are widened by the executor when it fills the region           */
} vkg_region;

/* A constant whose 16-bit host data the executor widens to f32 (compile option read_16bit 0). */
static inline int vkg_region_widens(const vkg_region *r) {
    return r->kind == VKG_REGION_CONSTANT && r->dtype != r->host_dtype;
}

#define VKG_MAX_BINDINGS 6

typedef struct vkg_binding {
    int32_t region;        /* -1: unused slot                                                */
    uint64_t offset;       /* byte offset in the region, a multiple of the plan's alignment  */
    uint64_t bytes;        /* bytes the kernel may touch from offset                         */
    int writes;
} vkg_binding;

/* Each family's parameter block as the member of its name; push constants are at most 128 bytes. */
typedef union vkg_params {
#define VKG_KERNEL(ENUM, name, n_bindings, units, cost, ...) vkg_##name##_params name;
#include "graph/kernels.def"
    uint32_t words[32];
} vkg_params;
#define VKG_KERNEL(ENUM, name, n_bindings, units, cost, ...) \
    _Static_assert(sizeof(vkg_##name##_params) <= sizeof(uint32_t[32]), #name " parameters exceed 128 bytes");
#include "graph/kernels.def"

typedef struct vkg_step {
    vkg_kernel kernel;
    vkg_tensor node;        /* the graph node this step computes (for dumps and profiles)     */
    char label[48];         /* the op as a person reads it: "matmul+bias+gelu", "softmax+mask" */
    vkg_binding bind[VKG_MAX_BINDINGS];
    vkg_params params;
    int barrier;            /* reads or overwrites what a step since the last barrier wrote    */
    int in_place;           /* its output occupies its input's bytes                          */
} vkg_step;

/* Where a graph node's value lives after compilation (views share their base's region). */
typedef struct vkg_placement {
    int32_t region;         /* -1: the node has no storage (dropped or never materialised)    */
    uint64_t offset;        /* bytes, start of the node's storage                             */
    uint64_t bytes;
    int32_t first_step, last_step;  /* lifetime in steps (arena tensors)                       */
    int64_t index_min, index_max; /* runtime indices: the values every use can take (the session
                                     refuses a run with one outside)                           */
    vkg_tensor within;      /* computed straight into its part of this concat, whose bytes
                               hold its own; else VKG_NONE                                     */
} vkg_placement;

struct vkg_plan {
    const vkg_graph *graph;
    vkg_compile_options opts;
    vkg_region *regions;
    int n_regions;
    vkg_step *steps;
    int n_steps;
    vkg_placement *place;   /* one per graph node                                              */
    vkg_memory_stats stats;
};

/* Whether step i of p reads or writes bytes that a step in [since, i) wrote, or writes bytes such
 * a step read: the one definition of a hazard.  The planner sets each step's barrier flag from it
 * (since = the step after the last barrier); executors that run steps concurrently check the
 * flags against it. */
int vkg_plan_step_hazard(const vkg_plan *p, int i, int since);

#endif
