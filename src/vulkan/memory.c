/* Buffers for a session's regions, packed into a few allocations, and staged copies. */
#include "vulkan/memory.h"

#include "base/error.h"

#include <stdlib.h>
#include <string.h>

#define MIB (1024.0 * 1024.0)
#define BLOCK_CAP ((VkDeviceSize)1 << 30)        /* largest allocation we ask for, if allowed */
#define STAGING_BYTES ((VkDeviceSize)16 << 20)

static VkDeviceSize align_up(VkDeviceSize v, VkDeviceSize a) { return a ? (v + a - 1) / a * a : v; }

static const VkBufferUsageFlags BUFFER_USAGE =
    VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT |
    VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;

static int host_memory_type(const vkg_vk_context *c, uint32_t bits) {
    const VkMemoryPropertyFlags vc = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    int t = vkg_vk_memory_type(c, bits, vc | VK_MEMORY_PROPERTY_HOST_CACHED_BIT);
    return t >= 0 ? t : vkg_vk_memory_type(c, bits, vc);
}

static int device_memory_type(const vkg_vk_context *c, uint32_t bits) {
    int t = vkg_vk_memory_type(c, bits, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    return t >= 0 ? t : vkg_vk_memory_type(c, bits, 0);
}

static int is_mappable(const vkg_vk_context *c, int type) {
    const VkMemoryPropertyFlags vc = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
    return (c->memory.memoryTypes[type].propertyFlags & vc) == vc;
}

static vkg_status allocate(vkg_vk_context *c, VkDeviceSize bytes, int type, VkDeviceSize total,
                           VkDeviceMemory *out, vkg_error *err) {
    VkMemoryAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .allocationSize = bytes,
        .memoryTypeIndex = (uint32_t)type,
    };
    VkResult r = vkAllocateMemory(c->device, &ai, NULL, out);
    if (r == VK_SUCCESS) {
        vkg_memory_count *m = c->device_memory;
        if (m && (m->bytes += bytes) > m->peak_bytes) m->peak_bytes = m->bytes;
        return VKG_OK;
    }
    *out = VK_NULL_HANDLE;
    uint32_t heap = c->memory.memoryTypes[type].heapIndex;
    vkg_status st = r == VK_ERROR_OUT_OF_HOST_MEMORY ? VKG_ERR_OUT_OF_MEMORY
                    : r == VK_ERROR_OUT_OF_DEVICE_MEMORY ? VKG_ERR_OUT_OF_DEVICE_MEMORY : VKG_ERR_DEVICE;
    return vkg_error_set(err, st,
                         "allocating %.1f MiB of Vulkan memory (type %d, heap %u of %.1f MiB) failed with %s; "
                         "the session needs %.1f MiB in all on %s",
                         (double)bytes / MIB, type, heap, (double)c->memory.memoryHeaps[heap].size / MIB,
                         vkg_vk_result_name(r), (double)total / MIB, c->props.deviceName);
}

vkg_status vkg_vk_memory_create(vkg_vk_context *c, int n, const vkg_vk_buffer_request *req, int force_staging,
                                vkg_vk_buffer *bufs, vkg_vk_memory *mem, vkg_error *err) {
    memset(mem, 0, sizeof *mem);
    memset(bufs, 0, (size_t)n * sizeof *bufs);
    vkg_status imported = vkg_vk_import_host(c, n, req, bufs, mem, err);
    if (imported != VKG_OK) return imported;
    /* Blocks of at most 1 GiB (easier for a driver to place), but one buffer may fill a block
     * of its own up to the device's largest allocation. */
    VkDeviceSize max_buffer = c->max_allocation ? c->max_allocation : BLOCK_CAP;
    VkDeviceSize cap = max_buffer < BLOCK_CAP ? max_buffer : BLOCK_CAP;
    VkMemoryRequirements *mr = calloc((size_t)n + 1, sizeof *mr);
    int *type = calloc((size_t)n + 1, sizeof *type);
    int *block = calloc((size_t)n + 1, sizeof *block);
    VkDeviceSize *offset = calloc((size_t)n + 1, sizeof *offset);
    struct { int type; VkDeviceSize size; } *blocks = calloc((size_t)n + 1, sizeof *blocks);
    vkg_status st = VKG_OK;
    if (!mr || !type || !block || !offset || !blocks) {
        st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory planning device memory");
        goto done;
    }

    for (int i = 0; i < n && st == VKG_OK; i++) {
        type[i] = -1;
        if (bufs[i].imported) continue;
        VkBufferCreateInfo bci = {
            .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
            .size = align_up(req[i].bytes ? req[i].bytes : 16, 256),
            .usage = BUFFER_USAGE,
            .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
        };
        if (bci.size > max_buffer) {   /* refused before the driver sees a size it cannot take */
            st = vkg_error_set(err, VKG_ERR_UNSUPPORTED,
                               "a buffer of %.1f MiB exceeds the largest allocation %s allows (%.1f MiB)",
                               (double)bci.size / MIB, c->props.deviceName, (double)max_buffer / MIB);
            break;
        }
        VkResult r = vkCreateBuffer(c->device, &bci, NULL, &bufs[i].buffer);
        if (r != VK_SUCCESS) {
            bufs[i].buffer = VK_NULL_HANDLE;
            st = vkg_vk_fail(err, r, "vkCreateBuffer");
            break;
        }
        bufs[i].size = bci.size;
        vkGetBufferMemoryRequirements(c->device, bufs[i].buffer, &mr[i]);
        type[i] = req[i].host ? host_memory_type(c, mr[i].memoryTypeBits) : device_memory_type(c, mr[i].memoryTypeBits);
        if (type[i] < 0)
            st = vkg_error_set(err, VKG_ERR_UNSUPPORTED, "%s has no %s memory type for storage buffers",
                               c->props.deviceName, req[i].host ? "host-visible coherent" : "usable");
        else if (mr[i].size > max_buffer)
            st = vkg_error_set(err, VKG_ERR_UNSUPPORTED,
                               "a buffer of %.1f MiB exceeds the largest allocation %s allows (%.1f MiB)",
                               (double)mr[i].size / MIB, c->props.deviceName, (double)max_buffer / MIB);
    }
    if (st != VKG_OK) goto done;

    /* Pack buffers of one memory type (and one host/device class) into blocks of at most cap. */
    int n_blocks = 0;
    for (int t = 0; t < (int)c->memory.memoryTypeCount; t++) {
        for (int host = 0; host <= 1; host++) {
            int cur = -1;
            for (int i = 0; i < n; i++) {
                if (bufs[i].imported || type[i] != t || (req[i].host != 0) != host) continue;
                VkDeviceSize at = cur >= 0 ? align_up(blocks[cur].size, mr[i].alignment) : 0;
                if (cur < 0 || at + mr[i].size > cap) {
                    cur = n_blocks++;
                    blocks[cur].type = t;
                    blocks[cur].size = 0;
                    at = 0;
                }
                block[i] = cur;
                offset[i] = at;
                blocks[cur].size = at + mr[i].size;
            }
        }
    }
    mem->blocks = calloc((size_t)n_blocks + 1, sizeof *mem->blocks);
    if (!mem->blocks) {
        st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory planning device memory");
        goto done;
    }
    for (int b = 0; b < n_blocks; b++) mem->total_bytes += blocks[b].size;
    /* Everything the session needs, summed per heap and checked against the heap's size before
     * the first allocation: a config of thousands of layers and a million positions is refused
     * here, not allocated block by block until the driver (or, on lavapipe, the host) runs out. */
    for (uint32_t h = 0; h < c->memory.memoryHeapCount; h++) {
        VkDeviceSize need = 0;
        for (int b = 0; b < n_blocks; b++)
            if (c->memory.memoryTypes[blocks[b].type].heapIndex == h) need += blocks[b].size;
        const VkMemoryHeap *heap = &c->memory.memoryHeaps[h];
        if (need > heap->size) {
            st = vkg_error_set(err, VKG_ERR_OUT_OF_DEVICE_MEMORY,
                               "the session needs %.1f MiB of %s memory (heap %u) but %s has %.1f MiB there "
                               "(%.1f MiB in all: weights, KV cache, arena, inputs and outputs)",
                               (double)need / MIB, heap->flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT ? "device-local" : "host",
                               h, c->props.deviceName, (double)heap->size / MIB, (double)mem->total_bytes / MIB);
            goto done;
        }
    }
    void **maps = calloc((size_t)n_blocks + 1, sizeof *maps);
    if (!maps) {
        st = vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory planning device memory");
        goto done;
    }
    for (int b = 0; b < n_blocks && st == VKG_OK; b++) {
        st = allocate(c, blocks[b].size, blocks[b].type, mem->total_bytes, &mem->blocks[b], err);
        if (st == VKG_OK) mem->n_blocks = b + 1, mem->allocated_bytes += blocks[b].size;
        if (st == VKG_OK && is_mappable(c, blocks[b].type)) {
            VkResult r = vkMapMemory(c->device, mem->blocks[b], 0, VK_WHOLE_SIZE, 0, &maps[b]);
            if (r != VK_SUCCESS) st = vkg_vk_fail(err, r, "vkMapMemory");
        }
    }
    for (int i = 0; i < n && st == VKG_OK; i++) {
        if (bufs[i].imported) continue;
        VkResult r = vkBindBufferMemory(c->device, bufs[i].buffer, mem->blocks[block[i]], offset[i]);
        if (r != VK_SUCCESS) st = vkg_vk_fail(err, r, "vkBindBufferMemory");
        if (maps[block[i]] && (req[i].host || !force_staging)) bufs[i].mapped = (uint8_t *)maps[block[i]] + offset[i];
    }
    free(maps);

done:
    free(mr);
    free(type);
    free(block);
    free(offset);
    free(blocks);
    if (st != VKG_OK) vkg_vk_memory_free(c, n, bufs, mem);
    return st;
}

void vkg_vk_memory_free(vkg_vk_context *c, int n, vkg_vk_buffer *bufs, vkg_vk_memory *mem) {
    for (int i = 0; i < n; i++)
        if (bufs[i].buffer) vkDestroyBuffer(c->device, bufs[i].buffer, NULL);
    memset(bufs, 0, (size_t)n * sizeof *bufs);
    for (int b = 0; b < mem->n_blocks; b++) vkFreeMemory(c->device, mem->blocks[b], NULL);
    for (int b = 0; b < mem->n_imported; b++) vkFreeMemory(c->device, mem->imported[b], NULL);
    if (c->device_memory) c->device_memory->bytes -= mem->allocated_bytes;
    vkg_vk_memory_abandon(mem);
}

void vkg_vk_memory_abandon(vkg_vk_memory *mem) {
    free(mem->blocks);
    free(mem->imported);
    memset(mem, 0, sizeof *mem);
}

void vkg_vk_staging_free(vkg_vk_context *c, vkg_vk_staging *st) {
    if (st->pending) { /* bounded: see vk_backend.c */
        vkg_error ignored;
        vkg_vk_late_fence(c, st->fence, "freeing the staging buffer", &ignored);
    }
    if (st->fence) vkDestroyFence(c->device, st->fence, NULL);
    if (st->cmd) vkFreeCommandBuffers(c->device, c->pool, 1, &st->cmd);
    if (st->buffer) vkDestroyBuffer(c->device, st->buffer, NULL);
    if (st->memory) vkFreeMemory(c->device, st->memory, NULL);
    if (st->memory && c->device_memory) c->device_memory->bytes -= st->memory_bytes;
    memset(st, 0, sizeof *st);
}

/* st's command buffer and fence, made on first use: every copy needs them, a copy between two
 * device buffers nothing more. */
static vkg_status staging_commands(vkg_vk_context *c, vkg_vk_staging *st, vkg_error *err) {
    if (st->cmd) return VKG_OK;
    VkCommandBufferAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
        .commandPool = c->pool,
        .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
        .commandBufferCount = 1,
    };
    VkResult r = vkAllocateCommandBuffers(c->device, &ai, &st->cmd);
    if (r != VK_SUCCESS) {
        st->cmd = VK_NULL_HANDLE;
        return vkg_vk_fail(err, r, "vkAllocateCommandBuffers");
    }
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    r = vkCreateFence(c->device, &fci, NULL, &st->fence);
    if (r != VK_SUCCESS) {
        st->fence = VK_NULL_HANDLE;
        vkFreeCommandBuffers(c->device, c->pool, 1, &st->cmd);
        st->cmd = VK_NULL_HANDLE;
        return vkg_vk_fail(err, r, "vkCreateFence");
    }
    return VKG_OK;
}

/* st's host-visible buffer (with its command buffer and fence), made on first use. */
static vkg_status staging_init(vkg_vk_context *c, vkg_vk_staging *st, vkg_error *err) {
    vkg_status s = staging_commands(c, st, err);
    if (s != VKG_OK || st->buffer) return s;
    VkDeviceSize size = c->max_allocation && c->max_allocation < STAGING_BYTES ? c->max_allocation : STAGING_BYTES;
    vkg_vk_buffer_request req = {.bytes = size, .host = 1};
    vkg_vk_buffer buf;
    vkg_vk_memory mem;
    s = vkg_vk_memory_create(c, 1, &req, 0, &buf, &mem, err);
    if (s != VKG_OK) return s;
    st->buffer = buf.buffer;
    st->memory = mem.blocks[0];
    st->memory_bytes = mem.allocated_bytes;
    st->mapped = buf.mapped;
    st->size = size;
    free(mem.blocks);
    return VKG_OK;
}

/* Records and runs the copies `regions` from buffer `from` to buffer `to` in st's command buffer
 * (from VK_NULL_HANDLE: zeros into the regions' destinations instead, whole words), between
 * barriers against the compute steps and the host, and waits for them. */
static vkg_status submit_copies(vkg_vk_context *c, vkg_vk_staging *st, VkBuffer from, VkBuffer to,
                                const VkBufferCopy *regions, uint32_t n, const char *what, vkg_error *err) {
    VkResult r;
    if (st->pending) {   /* an earlier copy timed out: it must finish before its buffers are reused */
        vkg_status s = vkg_vk_late_fence(c, st->fence, "waiting for an earlier copy to or from the device", err);
        if (s != VKG_OK) return s;
        st->pending = 0;
    }
    r = vkResetCommandBuffer(st->cmd, 0);
    if (r != VK_SUCCESS) return vkg_vk_fail(err, r, "vkResetCommandBuffer");
    VkCommandBufferBeginInfo bi = {
        .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
        .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
    };
    r = vkBeginCommandBuffer(st->cmd, &bi);
    if (r != VK_SUCCESS) return vkg_vk_fail(err, r, "vkBeginCommandBuffer");
    VkMemoryBarrier before = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_HOST_WRITE_BIT |
                         VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
    };
    vkCmdPipelineBarrier(st->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_HOST_BIT |
                                      VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0, NULL, 0, NULL);
    if (from) vkCmdCopyBuffer(st->cmd, from, to, n, regions);
    else
        for (uint32_t i = 0; i < n; i++) vkCmdFillBuffer(st->cmd, to, regions[i].dstOffset, regions[i].size, 0);
    VkMemoryBarrier after = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
        .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
        .dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
    };
    vkCmdPipelineBarrier(st->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &after, 0, NULL,
                         0, NULL);
    r = vkEndCommandBuffer(st->cmd);
    if (r != VK_SUCCESS) return vkg_vk_fail(err, r, "vkEndCommandBuffer");
    vkg_status s = vkg_vk_submit_wait(c, st->cmd, st->fence, what, err);
    if (s == VKG_ERR_TIMEOUT) st->pending = 1;
    return s;
}

static vkg_status staged_copy(vkg_vk_context *c, vkg_vk_staging *st, const vkg_vk_buffer *b, VkDeviceSize offset,
                              VkDeviceSize bytes, int to_device, vkg_error *err) {
    VkBufferCopy region = {
        .srcOffset = to_device ? 0 : offset,
        .dstOffset = to_device ? offset : 0,
        .size = bytes,
    };
    return submit_copies(c, st, to_device ? st->buffer : b->buffer, to_device ? b->buffer : st->buffer, &region, 1,
                         to_device ? "uploading through staging" : "reading through staging", err);
}

static vkg_status check_range(const vkg_vk_buffer *b, VkDeviceSize offset, size_t bytes, vkg_error *err) {
    if (offset > b->size || bytes > b->size - offset)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                             "%zu bytes at offset %llu do not fit a Vulkan buffer of %llu bytes", bytes,
                             (unsigned long long)offset, (unsigned long long)b->size);
    return VKG_OK;
}

vkg_status vkg_vk_buffer_write(vkg_vk_context *c, vkg_vk_staging *st, const vkg_vk_buffer *b, VkDeviceSize offset,
                               const void *data, size_t bytes, vkg_error *err) {
    offset += b->start;
    vkg_status s = check_range(b, offset, bytes, err);
    if (s != VKG_OK || bytes == 0) return s;
    if (b->mapped) {
        if (data) memcpy(b->mapped + offset, data, bytes);
        else memset(b->mapped + offset, 0, bytes);
        return VKG_OK;
    }
    if (!data && offset % 4 == 0 && bytes % 4 == 0) { /* zeros filled on the device, no host traffic: a
                                                        KV cache of gigabytes in one command */
        const VkBufferCopy whole = {.dstOffset = offset, .size = bytes};
        s = staging_commands(c, st, err);
        return s == VKG_OK ? submit_copies(c, st, VK_NULL_HANDLE, b->buffer, &whole, 1, "zeroing device memory", err)
                           : s;
    }
    s = staging_init(c, st, err);
    for (size_t done = 0; s == VKG_OK && done < bytes;) {
        size_t n = bytes - done < st->size ? bytes - done : (size_t)st->size;
        if (data) memcpy(st->mapped, (const uint8_t *)data + done, n);
        else memset(st->mapped, 0, n);
        s = staged_copy(c, st, b, offset + done, n, 1, err);
        done += n;
    }
    return s;
}

vkg_status vkg_vk_buffer_read(vkg_vk_context *c, vkg_vk_staging *st, const vkg_vk_buffer *b, VkDeviceSize offset,
                              void *data, size_t bytes, vkg_error *err) {
    if (!data) return vkg_vk_buffer_write(c, st, b, offset, NULL, bytes, err);
    offset += b->start;
    vkg_status s = check_range(b, offset, bytes, err);
    if (s != VKG_OK || bytes == 0) return s;
    if (b->mapped) {
        memcpy(data, b->mapped + offset, bytes);
        return VKG_OK;
    }
    s = staging_init(c, st, err);
    for (size_t done = 0; s == VKG_OK && done < bytes;) {
        size_t n = bytes - done < st->size ? bytes - done : (size_t)st->size;
        s = staged_copy(c, st, b, offset + done, n, 0, err);
        if (s == VKG_OK) memcpy((uint8_t *)data + done, st->mapped, n);
        done += n;
    }
    return s;
}

vkg_status vkg_vk_buffer_copy(vkg_vk_context *c, vkg_vk_staging *st, const vkg_vk_buffer *from,
                              VkDeviceSize from_offset, const vkg_vk_buffer *to, VkDeviceSize to_offset,
                              VkDeviceSize stride, uint32_t count, VkDeviceSize bytes, vkg_error *err) {
    from_offset += from->start;
    to_offset += to->start;
    const VkDeviceSize span = count ? (VkDeviceSize)(count - 1) * stride + bytes : 0;
    vkg_status s = check_range(from, from_offset, span, err);
    if (s == VKG_OK) s = check_range(to, to_offset, span, err);
    if (s != VKG_OK || span == 0 || bytes == 0) return s;
    if (from->mapped && to->mapped) {
        for (uint32_t i = 0; i < count; i++)
            memcpy(to->mapped + to_offset + i * stride, from->mapped + from_offset + i * stride, bytes);
        return VKG_OK;
    }
    VkBufferCopy *regions = malloc((size_t)count * sizeof *regions);
    if (!regions) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for %u copies", count);
    for (uint32_t i = 0; i < count; i++)
        regions[i] = (VkBufferCopy){.srcOffset = from_offset + i * stride, .dstOffset = to_offset + i * stride,
                                    .size = bytes};
    s = staging_commands(c, st, err);
    if (s == VKG_OK) s = submit_copies(c, st, from->buffer, to->buffer, regions, count, "copying on the device", err);
    free(regions);
    return s;
}
