/* A plan made ready to run on a Vulkan device: buffers for its regions, one descriptor set per
 * step, and the whole plan recorded once into a command buffer that each run resubmits. */
#ifndef VKG_VK_SESSION_H
#define VKG_VK_SESSION_H

#include "vulkan/memory.h"
#include "vulkan/pipelines.h"

typedef struct vkg_vk_step {
    const vkg_vk_pipeline *pipeline;
    uint32_t groups[3];          /* workgroups to dispatch; 0 in any: nothing to do         */
    VkDescriptorSet set;
    int barrier;                 /* a compute barrier precedes this step                    */
    /* An attention step whose keys are split over workgroups: the first dispatch writes their
     * softmax states to the session's attention states, this one merges them into out. */
    const vkg_vk_pipeline *merge;   /* NULL: one dispatch                                      */
    uint32_t merge_groups[3];
    VkDescriptorSet merge_set;
    uint64_t states_bytes;       /* of the attention states the first dispatch writes          */
} vkg_vk_step;

typedef struct vkg_vk_session {
    vkg_vk_context *c;
    const vkg_plan *plan;
    int force_staging;           /* device-local buffers reached through staging only       */
    vkg_vk_buffer *buffers;      /* one per region, then the dummy bound to unused slots, then
                                    the attention states (VKG_VK_STATES_BUFFER)               */
    uint64_t states_bytes;       /* the attention states' size: the largest step's          */
    vkg_vk_buffer *own;          /* the buffers this session created (a shared region's own
                                    entry is a small placeholder)                           */
    char *borrowed;              /* per region: the buffer belongs to another session       */
    vkg_vk_memory memory;
    vkg_vk_staging staging;
    vkg_vk_step *steps;
    int missing_barriers;        /* steps that needed a barrier the plan did not flag       */
    VkDescriptorPool pool;
    VkBufferView *views;
    int n_views;
    int n_segments;              /* the plan's pieces, one submission each (tuning's
                                    submit_work)                                            */
    int *segment_first;          /* piece i: steps [segment_first[i], segment_first[i + 1])  */
    VkCommandBuffer *cmd;        /* the plan, one command buffer per piece                  */
    VkCommandBuffer *cmd_timed;  /* the same with a timestamp around each step (lazily)     */
    VkCommandBuffer cmd_steps;   /* a range of steps, recorded anew for each run_steps      */
    VkQueryPool queries;
    VkFence fence;
    int pending;                 /* a submission timed out and may still be running         */
    int lost;                    /* the device was lost: every call fails                   */
} vkg_vk_session;

/* The buffers beyond the plan's regions: the dummy bound to unused slots, the chunk states of
 * attention steps split over workgroups (shared by them all: each merges before the next one
 * starts). */
#define VKG_VK_DUMMY_BUFFER(plan) ((plan)->n_regions)
#define VKG_VK_STATES_BUFFER(plan) ((plan)->n_regions + 1)
#define VKG_VK_EXTRA_BUFFERS 2

/* record.c */
/* The shader that runs plan step st on this device, its specialization constants (at most
 * VKG_VK_MAX_SPEC) and its workgroup count. */
vkg_status vkg_vk_step_shader(const vkg_vk_context *c, const vkg_step *st, vkg_vk_shader *sh, uint32_t spec[],
                              uint32_t *n_spec, uint32_t groups[3], vkg_error *err);
/* Chooses each step's shader and workgroup count, gets its pipeline, checks its bindings
 * against the device's limits, and decides where barriers go. */
vkg_status vkg_vk_steps_prepare(vkg_vk_session *s, vkg_error *err);
/* Descriptor pool, one set per step, texel-buffer views. */
vkg_status vkg_vk_descriptors_create(vkg_vk_session *s, vkg_error *err);
/* Records steps [first, first + count) of the plan into cmd; with queries (the plan's, n_steps +
 * 1 of them), a timestamp after each step, and with step 0 the queries' reset and a timestamp
 * before it. */
vkg_status vkg_vk_record(vkg_vk_session *s, VkCommandBuffer cmd, VkQueryPool queries, int first, int count,
                         vkg_error *err);

#endif
