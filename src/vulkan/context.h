/* The Vulkan device behind a vkg_device: instance, chosen physical device, logical device with
 * one compute queue, what the shaders may use, and the pipelines made so far.  One context per
 * opened device; sessions (vk_backend.c) borrow it.
 *
 * Function pointers come from volk.  Only volkLoadInstance() is called (never volkLoadDevice()),
 * so device-level calls go through the loader's dispatch and stay correct when several devices,
 * even from different drivers, are open at once.
 *
 * Its settings are the vkg_device_options it was opened with (validation, timeout, pipeline
 * cache, matmul shaders, step printing); it reads no environment variables. */
#ifndef VKG_VK_CONTEXT_H
#define VKG_VK_CONTEXT_H

#include <volk.h>

#include "runtime/backend.h"

/* Sizes chosen per device when it is opened; every pipeline is specialised with them.  Tests may
 * change them on an open device (before creating sessions) to cover other shapes of the same
 * shaders, e.g. row workgroups of one or many subgroups. */
typedef struct vkg_vk_tuning {
    uint32_t elementwise_wg;   /* invocations per workgroup: binary, unary, embedding           */
    uint32_t row_wg;           /* invocations per row: softmax, layernorm (any multiple of 1)    */
    uint32_t max_groups;       /* element-wise and row shaders: at most this many workgroups,
                                  each looping over its share (0: one per element block or row) */
    uint32_t min_group_work;   /* ... and at least this many elements per workgroup (0: any)    */
    int matmul_texel;          /* 1: matmul reads A and B through uniform texel buffers          */
    int texel_16bit;           /* ... a 16-bit B too (R16_UINT texels); else a 16-bit B goes
                                  through the storage-buffer shaders                            */
    int texel_16bit_x8;        /* ... and where its layout allows, eight 16-bit elements per
                                  R32G32B32A32_UINT texel (half the fetches)                   */
    uint32_t mm_wg_x, mm_wg_y; /* matmul workgroup (columns, rows of invocations)                */
    uint32_t mm_tm, mm_tn;     /* outputs per invocation: rows, columns (register block); the
                                  vec4 texel shaders need mm_tn % 4 == 0, the float texel shader
                                  (odd strides) uses 4 x 4                                      */
    uint32_t mm_tm_tall;       /* vec4 texel matmuls: rows per invocation where M >= mm_wg_y *
                                  mm_tm_tall (else mm_tm)                                       */
    uint32_t mm_bk;            /* tiled matmul: depth of one shared-memory slice                 */
    uint32_t mv_wg;            /* M == 1: invocations per workgroup                              */
    uint32_t mv_cols;          /* M == 1, tiled path: columns per workgroup (split-K by
                                  mv_wg / mv_cols)                                              */
    uint32_t mv_tn;            /* M == 1, B read along n: columns per invocation (x4) */
    int matvec_texel;          /* M == 1 with B along n through matvec_texel.glsl (16-byte
                                  texels of B) where the layout allows; texel path only        */
    uint32_t mvx_wg;           /* ... invocations per workgroup (a multiple of both splits)     */
    uint32_t mvx_split;        /* ... groups of them splitting k, summed in shared memory       */
    uint32_t mvx_split_rows;   /* ... the same for M > 1 (the rows of a batch's decode step)    */
    uint32_t mvx_tn;           /* ... texels of columns per invocation (halved for few columns) */
    uint32_t mvx_min_groups;   /* ... workgroups wanted at least, e.g. the device's threads     */
    int mvx_sync;              /* ... a workgroup barrier after every four rows, so that the
                                  SIMD batches of a software rasteriser sweep each row together
                                  (see matvec_texel.glsl)                                       */
    int matvec_texelt;         /* M == 1 with B along k through matvec_texelt.glsl (the lanes of
                                  a subgroup share rows) where the layout allows; texel path
                                  only                                                         */
    uint32_t mvt_wg;           /* ... invocations per workgroup                                 */
    uint32_t mvt_rows;         /* ... rows a subgroup walks together                            */
    uint32_t mvt_blocks;       /* ... blocks per span of rows (a block's rows this far apart)   */
    uint32_t mvt_spans;        /* ... spans per workgroup                                       */
    uint32_t attn_chunk_keys;  /* a decode step's attention (a subgroup per query row): its keys
                                  split over workgroups of this many keys each, their softmax
                                  states merged by a second dispatch; 0: one workgroup walks
                                  them all (record.c's attention_chunk_keys)                   */
    uint64_t submit_work;      /* multiply-adds one submission of a run holds at most: a longer
                                  run goes to the queue in pieces (record.c's segments), each
                                  finished within the timeout; a step costlier alone is a piece
                                  of its own                                                    */
    int force_staging;         /* sessions reach device-local buffers through staging copies
                                  even where the memory is host-visible (tests cover that path) */
} vkg_vk_tuning;

typedef struct vkg_vk_pipelines vkg_vk_pipelines;

typedef struct vkg_vk_context {
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;       /* VK_NULL_HANDLE without validation            */
    VkPhysicalDevice phys;
    int device_index;                         /* in enumeration order (vkgraph devices)       */
    VkDevice device;
    VkQueue queue;
    uint32_t queue_family;
    uint32_t timestamp_valid_bits;            /* 0: the queue cannot write timestamps          */
    int calibrated;                           /* VK_EXT_calibrated_timestamps, with the device's
                                                 and CLOCK_MONOTONIC's time domains, enabled     */
    VkCommandPool pool;                       /* one-shot transfer commands (uploads, reads)   */

    VkPhysicalDeviceProperties props;
    VkPhysicalDeviceSubgroupProperties subgroup;
    VkPhysicalDeviceMemoryProperties memory;
    VkDeviceSize max_allocation;              /* maxMemoryAllocationSize                       */
    int has_f16, has_16bit_storage;           /* features enabled on the logical device        */
    VkDeviceSize host_import_alignment;       /* VK_EXT_external_memory_host enabled on a device
                                                 whose memory is the host's (CPU, integrated):
                                                 minImportedHostPointerAlignment; 0: not used  */

    int validation;                           /* the Khronos layer is active                   */
    uint64_t *validation_counter;             /* the owning vkg_device's counter               */
    vkg_memory_count *device_memory;          /* the owning vkg_device's count (NULL: none)     */
    int quiet;
    vkg_device_options opts;                  /* what the device was opened with               */
    uint64_t timeout_ns;                      /* how long a submission may take before
                                                 VKG_ERR_TIMEOUT: opts.timeout_ms, default 60 s
                                                 (tests shorten it on an open device)          */

    vkg_vk_tuning tuning;
    vkg_vk_pipelines *pipelines;              /* made on first use, see pipelines.h            */
    int lost;                                 /* 0, VKG_VK_LOST or VKG_VK_HUNG            */
    int abandoned;                            /* a session was freed while its work still ran:
                                                 the device and the host memory that work reads
                                                 are never freed (vkg_device_has_abandoned_work) */
} vkg_vk_context;

/* vkg_vk_context.lost.  VKG_VK_LOST: the driver reported the device lost.  VKG_VK_HUNG: a
 * submission did not finish within the timeout; the device counts as lost (every other
 * submission fails at once, nothing waits for it without a bound, it is not waited idle) until
 * the owner of that submission sees its fence signal after all (vkg_vk_late_fence), and for
 * good when it still has not after a second timeout: a fence that never signals. */
enum { VKG_VK_LOST = 1, VKG_VK_HUNG = 2 };

/* Waits, once more and with the timeout, for a fence whose submission timed out: VKG_OK (and
 * the device counts as working again) when it has signalled, else VKG_ERR_DEVICE_LOST (or the
 * driver's error) with a message, the device then lost for good.  what names the waiter in the
 * message. */
vkg_status vkg_vk_late_fence(vkg_vk_context *c, VkFence fence, const char *what, vkg_error *err);

/* Opens Vulkan device `index` (enumeration order), or the best one when index < 0.  counter
 * receives one count per validation error or warning. */
vkg_status vkg_vk_context_create(int index, const vkg_device_options *opts, uint64_t *counter,
                                 vkg_vk_context **out, vkg_error *err);
void vkg_vk_context_free(vkg_vk_context *c);

/* Loader and instance only (for listing devices): volk initialised, no validation. */
vkg_status vkg_vk_instance_create(int validation, int sync_validation, uint64_t *counter, VkInstance *out,
                                  VkDebugUtilsMessengerEXT *messenger, vkg_error *err);
void vkg_vk_instance_free(VkInstance instance, VkDebugUtilsMessengerEXT messenger);

/* Maps a failed VkResult to a status and message: "<what>: VK_ERROR_... ".  Device loss and
 * memory exhaustion get their own statuses. */
vkg_status vkg_vk_fail(vkg_error *err, VkResult r, const char *what);
const char *vkg_vk_result_name(VkResult r);

/* Device facts used by both the chooser and `vkgraph devices`. */
const char *vkg_vk_device_type_name(VkPhysicalDeviceType t);
int vkg_vk_device_rank(VkPhysicalDeviceType t);   /* higher is preferred */
/* Why vkgraph cannot use a device (Vulkan < 1.2, no subgroup arithmetic, no compute queue), or
 * NULL when it can. */
const char *vkg_vk_unusable_reason(VkPhysicalDevice pd);

/* The device's default tuning, from its limits (subgroup size, invocations, device type). */
void vkg_vk_tuning_default(const vkg_vk_context *c, vkg_vk_tuning *t);
/* The widest 1-d workgroup the device runs: its x size limit or its invocation limit. */
uint32_t vkg_vk_max_workgroup_x(const vkg_vk_context *c);
/* The device's subgroup size (1 where it reports none). */
uint32_t vkg_vk_subgroup_size(const vkg_vk_context *c);

/* Submits cmd on the context's queue, signalling fence, and waits for it (fence reset after).
 * what names the work in messages ("running the plan"). */
vkg_status vkg_vk_submit_wait(vkg_vk_context *c, VkCommandBuffer cmd, VkFence fence, const char *what,
                              vkg_error *err);

/* A memory type index with all of `want` among `type_bits`, or -1. */
int vkg_vk_memory_type(const vkg_vk_context *c, uint32_t type_bits, VkMemoryPropertyFlags want);

#ifdef VKG_FAULT_INJECTION
#include "fault/vk_wrap.h" /* the fault-injection library only: Vulkan calls that can be made to fail */
#endif

#endif
