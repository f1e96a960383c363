/* The Vulkan executor: the backend operations of src/core/backend.h over a vkg_vk_context. */
#include "vulkan/vk_session.h"

#include "base/error.h"
#include "base/half.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void session_free(void *impl);

/* Waits for a submission that timed out earlier; it must finish before memory is touched. */
static vkg_status settle(vkg_vk_session *s, vkg_error *err) {
    if (s->lost || (s->c->lost && !s->pending))
        return vkg_error_set(err, VKG_ERR_DEVICE_LOST, "the Vulkan device %s was lost earlier; reopen the device",
                             s->c->props.deviceName);
    if (!s->pending) return VKG_OK;
    vkg_status st = vkg_vk_late_fence(s->c, s->fence, "waiting for an earlier run", err);
    if (st != VKG_OK) {
        s->lost = 1;
        return st;
    }
    s->pending = 0;
    return VKG_OK;
}

/* A constant's host data into its buffer: as it is, or (a plan compiled with read_16bit 0) 16-bit
 * elements widened to f32 a chunk at a time. */
static vkg_status upload_constant(vkg_vk_session *s, const vkg_region *rg, vkg_vk_buffer *buf, vkg_error *err) {
    if (!vkg_region_widens(rg)) return vkg_vk_buffer_write(s->c, &s->staging, buf, 0, rg->host, rg->bytes, err);
    enum { CHUNK = 1 << 18 };
    float *f = malloc(CHUNK * sizeof *f);
    if (!f) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory widening a 16-bit constant");
    const uint16_t *h = rg->host;
    const uint64_t n = rg->bytes / 4;
    vkg_status st = VKG_OK;
    for (uint64_t i = 0; i < n && st == VKG_OK; i += CHUNK) {
        uint64_t k = n - i < CHUNK ? n - i : CHUNK;
        for (uint64_t j = 0; j < k; j++)
            f[j] = rg->host_dtype == VKG_F16 ? vkg_f16_to_f32(h[i + j]) : vkg_bf16_to_f32(h[i + j]);
        st = vkg_vk_buffer_write(s->c, &s->staging, buf, 4 * i, f, (size_t)(4 * k), err);
    }
    free(f);
    return st;
}

static vkg_status create_buffers(vkg_vk_session *s, const vkg_vk_session *share, const int *share_map,
                                 vkg_error *err) {
    const vkg_plan *p = s->plan;
    int n = p->n_regions + VKG_VK_EXTRA_BUFFERS;
    vkg_vk_buffer_request *req = calloc((size_t)n, sizeof *req);
    s->buffers = calloc((size_t)n, sizeof *s->buffers);
    s->own = calloc((size_t)n, sizeof *s->own);
    s->borrowed = calloc((size_t)n, 1);
    if (!req || !s->buffers || !s->own || !s->borrowed) {
        free(req);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for %d regions", p->n_regions);
    }
    for (int r = 0; r < p->n_regions; r++) {
        vkg_region_kind k = p->regions[r].kind;
        s->borrowed[r] = share && share_map[r] >= 0;
        req[r].bytes = s->borrowed[r] ? 16 : p->regions[r].bytes; /* a placeholder for a shared region */
        req[r].host = k == VKG_REGION_INPUT || k == VKG_REGION_OUTPUT || k == VKG_REGION_INDICES;
        /* A constant the device reads as the caller holds it may be imported in place; one widened
         * from 16 bits at upload (vkg_region_widens) needs a buffer of its own. */
        if (k == VKG_REGION_CONSTANT && !s->borrowed[r] && !s->force_staging && !vkg_region_widens(&p->regions[r]))
            req[r].import_host = p->regions[r].host;
    }
    req[VKG_VK_DUMMY_BUFFER(p)].bytes = 256;
    req[VKG_VK_STATES_BUFFER(p)].bytes = s->states_bytes > 256 ? s->states_bytes : 256;
    vkg_status st = vkg_vk_memory_create(s->c, n, req, s->force_staging, s->own, &s->memory, err);
    free(req);
    if (st != VKG_OK) return st;
    for (int r = 0; r < n; r++) s->buffers[r] = s->borrowed[r] ? share->buffers[share_map[r]] : s->own[r];
    /* Constants once; everything else starts at zero (states must, the rest for determinism).
     * A shared region keeps what its owner holds. */
    for (int r = 0; r < p->n_regions && st == VKG_OK; r++) {
        const vkg_region *rg = &p->regions[r];
        if (s->borrowed[r] || s->buffers[r].imported) continue;
        if (rg->kind == VKG_REGION_CONSTANT && rg->host)
            st = upload_constant(s, rg, &s->buffers[r], err);
        else
            st = vkg_vk_buffer_write(s->c, &s->staging, &s->buffers[r], 0, NULL, s->buffers[r].size, err);
    }
    if (st == VKG_OK)
        st = vkg_vk_buffer_write(s->c, &s->staging, &s->buffers[VKG_VK_DUMMY_BUFFER(p)], 0, NULL, 256, err);
    return st;
}

/* n primary command buffers from the context's pool into cmd[] (all VK_NULL_HANDLE on failure,
 * as Vulkan leaves them). */
static vkg_status allocate_commands(vkg_vk_session *s, VkCommandBuffer *cmd, uint32_t n, vkg_error *err) {
    VkCommandBufferAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = s->c->pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = n,
    };
    VkResult r = vkAllocateCommandBuffers(s->c->device, &ai, cmd);
    if (r == VK_SUCCESS) return VKG_OK;
    for (uint32_t i = 0; i < n; i++) cmd[i] = VK_NULL_HANDLE;
    return vkg_vk_fail(err, r, "vkAllocateCommandBuffers");
}

/* The plan into *out, one command buffer per piece (s->segment_first), with queries or none.
 * *out is set once the buffers exist, so that session_free frees them after a failed recording. */
static vkg_status record_segments(vkg_vk_session *s, VkCommandBuffer **out, VkQueryPool queries, vkg_error *err) {
    VkCommandBuffer *cmd = calloc((size_t)s->n_segments, sizeof *cmd);
    if (!cmd) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for %d command buffers", s->n_segments);
    vkg_status st = allocate_commands(s, cmd, (uint32_t)s->n_segments, err);
    if (st != VKG_OK) {
        free(cmd);
        return st;
    }
    *out = cmd;
    for (int i = 0; i < s->n_segments; i++) {
        const int first = s->segment_first[i];
        if ((st = vkg_vk_record(s, cmd[i], queries, first, s->segment_first[i + 1] - first, err)) != VKG_OK)
            return st;
    }
    return VKG_OK;
}

static void free_segments(vkg_vk_session *s, VkCommandBuffer **cmd) {
    if (*cmd) vkFreeCommandBuffers(s->c->device, s->c->pool, (uint32_t)s->n_segments, *cmd);
    free(*cmd);
    *cmd = NULL;
}

static vkg_status create_commands(vkg_vk_session *s, vkg_error *err) {
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkResult r = vkCreateFence(s->c->device, &fci, NULL, &s->fence);
    if (r != VK_SUCCESS) {
        s->fence = VK_NULL_HANDLE;
        return vkg_vk_fail(err, r, "vkCreateFence");
    }
    return record_segments(s, &s->cmd, VK_NULL_HANDLE, err);
}

static vkg_status session_new(void *device, const vkg_plan *p, void *share, const int *share_map, void **out,
                              vkg_error *err) {
    *out = NULL;
    vkg_vk_session *s = calloc(1, sizeof *s);
    if (!s) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory creating a Vulkan session");
    s->c = device;
    s->plan = p;
    s->force_staging = s->c->tuning.force_staging;
    vkg_status st = vkg_vk_steps_prepare(s, err);
    if (st == VKG_OK) st = create_buffers(s, share, share_map, err);
    if (st == VKG_OK) st = vkg_vk_descriptors_create(s, err);
    if (st == VKG_OK) st = create_commands(s, err);
    if (st != VKG_OK) {
        session_free(s);
        return st;
    }
    *out = s;
    return VKG_OK;
}

static void session_free(void *impl) {
    vkg_vk_session *s = impl;
    if (!s) return;
    vkg_vk_context *c = s->c;
    /* Never an unbounded wait: a run that timed out may never finish.  When it still has not
     * after one more timeout, its command buffers, fence, descriptors and memory may be in use:
     * they are left alone (a leak, not a destroyed object the device still reads, and not a
     * process that hangs at exit), and so are the device and the host memory it imported (the
     * model's weights: vkg_device_has_abandoned_work); the session's own host memory is freed.
     * Once a session was abandoned so, every session freed after it is too: the abandoned work
     * may read memory they own (a batch's plans share the first plan's caches). */
    int in_use = c->abandoned;
    if (s->pending && !in_use) {
        vkg_error ignored;
        in_use = s->lost || vkg_vk_late_fence(c, s->fence, "freeing a session", &ignored) != VKG_OK;
    }
    if (s->lost && c->lost != VKG_VK_HUNG) vkDeviceWaitIdle(c->device);
    if (in_use) {
        if (c->lost == VKG_VK_HUNG) c->abandoned = 1;
        free(s->views);
        free(s->own);
        vkg_vk_memory_abandon(&s->memory);
        free(s->buffers);
        free(s->borrowed);
        free(s->steps);
        free(s->cmd);
        free(s->cmd_timed);
        free(s->segment_first);
        free(s);
        return;
    }
    free_segments(s, &s->cmd);
    free_segments(s, &s->cmd_timed);
    if (s->cmd_steps) vkFreeCommandBuffers(c->device, c->pool, 1, &s->cmd_steps);
    if (s->queries) vkDestroyQueryPool(c->device, s->queries, NULL);
    if (s->fence) vkDestroyFence(c->device, s->fence, NULL);
    /* Sets before the views and buffers they name. */
    if (s->pool) vkDestroyDescriptorPool(c->device, s->pool, NULL);
    for (int i = 0; i < s->n_views; i++) vkDestroyBufferView(c->device, s->views[i], NULL);
    free(s->views);
    vkg_vk_staging_free(c, &s->staging);
    if (s->own) vkg_vk_memory_free(c, s->plan->n_regions + VKG_VK_EXTRA_BUFFERS, s->own, &s->memory);
    free(s->own);
    free(s->buffers);
    free(s->borrowed);
    free(s->steps);
    free(s->segment_first);
    free(s);
}

static vkg_status check_region(const vkg_vk_session *s, int region, uint64_t offset, size_t bytes, vkg_error *err) {
    const vkg_plan *p = s->plan;
    if (region < 0 || region >= p->n_regions)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "region %d is not in the plan (it has %d)", region,
                             p->n_regions);
    if (offset > p->regions[region].bytes || bytes > p->regions[region].bytes - offset)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "%zu bytes at offset %llu exceed region %d (%llu bytes)",
                             bytes, (unsigned long long)offset, region, (unsigned long long)p->regions[region].bytes);
    return VKG_OK;
}

static vkg_status session_write(void *impl, int region, uint64_t offset, const void *data, size_t bytes,
                                vkg_error *err) {
    vkg_vk_session *s = impl;
    vkg_status st = check_region(s, region, offset, bytes, err);
    if (st == VKG_OK && s->buffers[region].imported)   /* its bytes are the caller's own memory */
        st = vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "region %d is a constant read in place from host memory "
                           "(vkg_device_options.no_host_import copies constants instead): it cannot be written", region);
    if (st == VKG_OK) st = settle(s, err);
    if (st != VKG_OK) return st;
    return vkg_vk_buffer_write(s->c, &s->staging, &s->buffers[region], offset, data, bytes, err);
}

static vkg_status session_read(void *impl, int region, uint64_t offset, void *data, size_t bytes, vkg_error *err) {
    vkg_vk_session *s = impl;
    vkg_status st = check_region(s, region, offset, bytes, err);
    if (st == VKG_OK) st = settle(s, err);
    if (st != VKG_OK) return st;
    return vkg_vk_buffer_read(s->c, &s->staging, &s->buffers[region], offset, data, bytes, err);
}

static vkg_status session_copy(void *impl, int src, uint64_t src_offset, int dst, uint64_t dst_offset, uint64_t stride,
                               uint32_t count, uint64_t bytes, vkg_error *err) {
    vkg_vk_session *s = impl;
    const uint64_t span = count ? (uint64_t)(count - 1) * stride + bytes : 0;
    vkg_status st = check_region(s, src, src_offset, span, err);
    if (st == VKG_OK) st = check_region(s, dst, dst_offset, span, err);
    if (st == VKG_OK && s->buffers[dst].imported)
        st = vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "region %d is a constant read in place from host memory: it "
                           "cannot be written", dst);
    if (st == VKG_OK) st = settle(s, err);
    if (st != VKG_OK) return st;
    return vkg_vk_buffer_copy(s->c, &s->staging, &s->buffers[src], src_offset, &s->buffers[dst], dst_offset, stride,
                              count, bytes, err);
}

/* The timed command buffer and its query pool, made on the first profiled run. */
static vkg_status prepare_timed(vkg_vk_session *s, vkg_error *err) {
    if (s->cmd_timed) return VKG_OK;
    VkQueryPoolCreateInfo qci = {
        .sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
        .queryType = VK_QUERY_TYPE_TIMESTAMP,
        .queryCount = (uint32_t)s->plan->n_steps + 1,
    };
    /* kept from an earlier try whose recording failed */
    VkResult r = s->queries ? VK_SUCCESS : vkCreateQueryPool(s->c->device, &qci, NULL, &s->queries);
    if (r != VK_SUCCESS) {
        s->queries = VK_NULL_HANDLE;
        return vkg_vk_fail(err, r, "vkCreateQueryPool");
    }
    vkg_status st = record_segments(s, &s->cmd_timed, s->queries, err);
    if (st != VKG_OK) free_segments(s, &s->cmd_timed);
    return st;
}

/* Host time (CLOCK_MONOTONIC ns) of the device tick `first`: calibrated against the device's
 * clock now where the device can, else placed so that the run sits in the middle of the host's
 * submit-to-fence window, which holds it (span_ns is its length on the GPU). */
static uint64_t host_origin(vkg_vk_session *s, uint64_t first, uint64_t mask, uint64_t submitted, uint64_t signalled,
                            uint64_t span_ns, const char **clock) {
    vkg_vk_context *c = s->c;
    if (c->calibrated && vkGetCalibratedTimestampsEXT) {
        VkCalibratedTimestampInfoEXT info[2] = {
            {.sType = VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT, .timeDomain = VK_TIME_DOMAIN_DEVICE_EXT},
            {.sType = VK_STRUCTURE_TYPE_CALIBRATED_TIMESTAMP_INFO_EXT, .timeDomain = VK_TIME_DOMAIN_CLOCK_MONOTONIC_EXT},
        };
        uint64_t now[2], deviation;
        if (vkGetCalibratedTimestampsEXT(c->device, 2, info, now, &deviation) == VK_SUCCESS) {
            *clock = "GPU timestamps mapped onto the host clock (CLOCK_MONOTONIC) with VK_EXT_calibrated_timestamps";
            uint64_t ago = (uint64_t)((double)(((now[0] & mask) - (first & mask)) & mask) *
                                      (double)c->props.limits.timestampPeriod + 0.5);
            return now[1] - ago;
        }
    }
    *clock = "GPU timestamps placed in the middle of the host's submit-to-fence window (CLOCK_MONOTONIC)";
    uint64_t window = signalled - submitted;
    return submitted + (window > span_ns ? (window - span_ns) / 2 : 0);
}

static vkg_status read_timestamps(vkg_vk_session *s, uint64_t submitted, uint64_t signalled, vkg_step_times *times,
                                  vkg_error *err) {
    int n = s->plan->n_steps;
    uint64_t *t = calloc((size_t)n + 1, sizeof *t);
    if (!t) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory reading timestamps");
    VkResult r = vkGetQueryPoolResults(s->c->device, s->queries, 0, (uint32_t)n + 1, ((size_t)n + 1) * sizeof *t, t,
                                       sizeof *t, VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
    if (r != VK_SUCCESS) {
        free(t);
        return vkg_vk_fail(err, r, "vkGetQueryPoolResults");
    }
    uint32_t bits = s->c->timestamp_valid_bits;
    uint64_t mask = bits >= 64 ? ~0ull : (1ull << bits) - 1;
    double period = s->c->props.limits.timestampPeriod;
    /* Query 0 is written before the first step, query i + 1 after step i: t[i] becomes the time
     * since query 0 in ns, wrapping within the valid bits. */
    const uint64_t first = t[0];
    for (int i = 0; i <= n; i++) t[i] = (uint64_t)((double)(((t[i] & mask) - (first & mask)) & mask) * period + 0.5);
    uint64_t origin = host_origin(s, first, mask, submitted, signalled, t[n], &times->clock);
    for (int i = 0; i < n; i++) {
        times->begin_ns[i] = origin + t[i];
        times->end_ns[i] = origin + t[i + 1];
    }
    free(t);
    return VKG_OK;
}

static vkg_status session_run(void *impl, vkg_step_times *times, vkg_error *err) {
    vkg_vk_session *s = impl;
    vkg_status st = settle(s, err);
    if (st != VKG_OK) return st;
    int timed = times && s->c->timestamp_valid_bits > 0;
    if (timed && (st = prepare_timed(s, err)) != VKG_OK) return st;
    /* The pieces one after another, each waited for within the timeout: a slow device's long run
     * is not a hung queue while its pieces keep finishing. */
    VkCommandBuffer *cmd = timed ? s->cmd_timed : s->cmd;
    char what[64] = "running the plan";
    uint64_t submitted = vkg_clock_ns();
    for (int i = 0; i < s->n_segments && st == VKG_OK; i++) {
        if (s->n_segments > 1)
            snprintf(what, sizeof what, "running the plan (submission %d of %d)", i + 1, s->n_segments);
        st = vkg_vk_submit_wait(s->c, cmd[i], s->fence, what, err);
    }
    uint64_t signalled = vkg_clock_ns();
    if (st == VKG_ERR_TIMEOUT) s->pending = 1;
    if (st == VKG_ERR_DEVICE_LOST) s->lost = 1;
    if (st != VKG_OK) return st;
    if (timed) return read_timestamps(s, submitted, signalled, times, err);
    if (times) { /* no timestamps on this queue: every step an empty span at the submit */
        times->clock = "this queue writes no timestamps: Vulkan steps are not timed";
        for (int i = 0; i < s->plan->n_steps; i++) times->begin_ns[i] = times->end_ns[i] = submitted;
    }
    return VKG_OK;
}

/* A range of steps: recorded into its own command buffer (made once, reset for every range). */
static vkg_status session_run_steps(void *impl, int first, int count, vkg_error *err) {
    vkg_vk_session *s = impl;
    vkg_status st = settle(s, err);
    if (st != VKG_OK) return st;
    if (!s->cmd_steps) {
        if ((st = allocate_commands(s, &s->cmd_steps, 1, err)) != VKG_OK) return st;
    } else {
        VkResult r = vkResetCommandBuffer(s->cmd_steps, 0);
        if (r != VK_SUCCESS) return vkg_vk_fail(err, r, "vkResetCommandBuffer");
    }
    if ((st = vkg_vk_record(s, s->cmd_steps, VK_NULL_HANDLE, first, count, err)) != VKG_OK) return st;
    st = vkg_vk_submit_wait(s->c, s->cmd_steps, s->fence, "running plan steps", err);
    if (st == VKG_ERR_TIMEOUT) s->pending = 1;
    if (st == VKG_ERR_DEVICE_LOST) s->lost = 1;
    return st;
}

static void device_free(void *impl) { vkg_vk_context_free(impl); }

static int has_abandoned_work(void *impl) { return ((const vkg_vk_context *)impl)->abandoned; }

static const vkg_backend_ops vulkan_ops = {
    .name = "vulkan",
    .session_new = session_new,
    .session_free = session_free,
    .write = session_write,
    .read = session_read,
    .copy = session_copy,
    .run = session_run,
    .run_steps = session_run_steps,
    .device_free = device_free,
    .has_abandoned_work = has_abandoned_work,
};

vkg_status vkg_vulkan_device_open(struct vkg_device *d, int index, vkg_error *err) {
    vkg_vk_context *c;
    vkg_status st = vkg_vk_context_create(index, &d->opts, &d->validation_errors, &c, err);
    if (st != VKG_OK) return st;
    d->ops = &vulkan_ops;
    d->impl = c;
    c->device_memory = &d->device_memory;
    /* deviceName holds at most 255 characters: keep 200 so the suffix always fits. */
    snprintf(d->name, sizeof d->name, "%.200s (vulkan:%d)", c->props.deviceName, c->device_index);
    d->software = c->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    const VkPhysicalDeviceLimits *l = &c->props.limits;
    uint64_t align = l->minStorageBufferOffsetAlignment;
    if (l->minTexelBufferOffsetAlignment > align) align = l->minTexelBufferOffsetAlignment;
    if (align < 4) align = 4;
    d->alignment = (uint32_t)align;
    uint64_t max = l->maxStorageBufferRange;
    if (c->max_allocation && c->max_allocation < max) max = c->max_allocation;
    d->max_binding_bytes = max / align * align;
    /* Every shader that reads a 16-bit operand has a storage-buffer form; without 16-bit storage
     * the plan holds such weights as f32, widened at upload (upload_constant). */
    d->read_16bit = c->has_16bit_storage;
    /* The texel shaders (software rasterisers) read B along k faster: prefill's texel matmul
     * puts more cache lines in flight per fetch, and decode's matvec_texelt.glsl streams rows
     * (README, "lavapipe").  A GPU's shared-memory tiles and split-K matrix-vector shader want
     * [K, N]. */
    d->transposed_weights = c->tuning.matmul_texel;
    return VKG_OK;
}
