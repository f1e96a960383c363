/* What an executor provides: the generic session code (src/core/session.c) maps tensors to plan
 * regions and calls these; the CPU executor (src/cpu) and the Vulkan executor (src/vulkan) each
 * implement them once. */
#ifndef VKG_BACKEND_H
#define VKG_BACKEND_H

#include "runtime/profile.h"
#include "graph/plan.h"

typedef struct vkg_backend_ops {
    const char *name;                 /* "cpu", "vulkan"                                    */
    /* Prepares everything a run needs: memory for every region (constants uploaded once),
     * pipelines, recorded commands.  When share is non-NULL (another session of this backend),
     * region r with share_map[r] >= 0 uses the memory of share's region share_map[r] instead of
     * its own (it is neither allocated, initialised nor freed here). */
    vkg_status (*session_new)(void *device, const vkg_plan *p, void *share, const int *share_map, void **session,
                              vkg_error *err);
    void (*session_free)(void *session);
    vkg_status (*write)(void *session, int region, uint64_t offset, const void *data, size_t bytes,
                        vkg_error *err);
    /* data == NULL: fill with zeros. */
    vkg_status (*read)(void *session, int region, uint64_t offset, void *data, size_t bytes,
                       vkg_error *err);
    /* Copies `count` blocks of `bytes` bytes from region src to region dst on the device, block i
     * from src_offset + i * stride to dst_offset + i * stride (a KV cache's first positions in
     * each of its planes); the blocks of src and dst do not overlap. */
    vkg_status (*copy)(void *session, int src, uint64_t src_offset, int dst, uint64_t dst_offset, uint64_t stride,
                       uint32_t count, uint64_t bytes, vkg_error *err);
    /* times, when non-NULL, receives every step's begin and end on the host clock, and how they
     * were taken. */
    vkg_status (*run)(void *session, vkg_step_times *times, vkg_error *err);
    /* Runs steps [first, first + count) only, as run would run them, untimed: for comparing two
     * devices step by step (src/conformance/compare.c, which sets a step's bound ranges with
     * write before it runs and reads them back with read). */
    vkg_status (*run_steps)(void *session, int first, int count, vkg_error *err);
    void (*device_free)(void *device);
    /* 1 when work that may still be running reads host memory the device was given (a session
     * freed after its run timed out twice): that memory must stay allocated for the rest of the
     * process.  NULL: never (the CPU executor's runs end before they return). */
    int (*has_abandoned_work)(void *device);
} vkg_backend_ops;

/* Memory a device's sessions hold on it (Vulkan allocations; the CPU executor's memory is the
 * host's and is not counted here): now, and the most at any moment since the device opened. */
typedef struct vkg_memory_count {
    uint64_t bytes, peak_bytes;
} vkg_memory_count;

struct vkg_device {
    const vkg_backend_ops *ops;
    void *impl;
    char name[256];
    vkg_device_options opts;
    int software;                 /* a Vulkan device of the CPU type: a software rasteriser
                                     (lavapipe), which "auto" passes over for the CPU executor */
    uint32_t alignment;           /* storage-buffer offset alignment the plan must respect   */
    uint64_t max_binding_bytes;   /* largest range one binding may span                     */
    int read_16bit;               /* kernels read f16/bf16 constants as stored; else the plan
                                     holds them as f32 (vkg_compile_options.read_16bit)     */
    int transposed_weights;       /* matmuls read weights faster as [N, K] than as [K, N]
                                     (vkg_device_prefers_transposed_weights)                */
    uint64_t validation_errors;   /* counted by the Vulkan debug messenger                  */
    vkg_memory_count device_memory;
    vkg_profile profile;          /* step times of every profiled run                       */
};

/* Backends' constructors; each fills d->ops, d->impl, d->name and the limits. */
vkg_status vkg_cpu_device_open(struct vkg_device *d, vkg_error *err);
/* index < 0: the best device (discrete, integrated, virtual, then software). */
vkg_status vkg_vulkan_device_open(struct vkg_device *d, int index, vkg_error *err);

#endif
