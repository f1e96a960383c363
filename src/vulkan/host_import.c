/* Constants read where they already lie.  On a device whose memory is the host's (a software
 * rasteriser, an integrated GPU), copying the weights into device memory would hold them twice;
 * instead the host pages that hold them are imported as device memory (VK_EXT_external_memory_host)
 * and each constant's buffer is bound at its own address inside them.  Any host range works: a
 * file mapping or an owned block, page-aligned or not (the pages around it are imported).
 *
 * Constants are taken in address order; those whose page ranges touch or overlap share one
 * import, up to the allocation cap.  A buffer must start at the driver's alignment, so it starts
 * at or below its constant, which then lies `start` bytes into it (vkg_vk_buffer.start; the
 * descriptors and copies add it).  A constant that cannot be bound so (a start that is no valid
 * descriptor offset) or whose import fails is left to the normal path, which copies it:
 * importing saves memory, it is never a reason to fail. */
#include "vulkan/memory.h"

#include "base/error.h"

#include <stdint.h>
#include <stdlib.h>

#define IMPORT_CAP ((VkDeviceSize)1 << 30)   /* the largest range imported as one allocation */

static const VkBufferUsageFlags IMPORT_USAGE = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                               VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT |
                                               VK_BUFFER_USAGE_TRANSFER_SRC_BIT;

typedef struct candidate {
    int req;
    uintptr_t lo, hi;   /* the constant's bytes */
} candidate;

static int by_address(const void *a, const void *b) {
    const candidate *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static VkBuffer new_buffer(vkg_vk_context *c, VkDeviceSize size) {
    VkExternalMemoryBufferCreateInfo ext = {
        .sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
        .handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
    };
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .pNext = &ext,
        .size = size,
        .usage = IMPORT_USAGE,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    VkBuffer buf;
    return vkCreateBuffer(c->device, &bci, NULL, &buf) == VK_SUCCESS ? buf : VK_NULL_HANDLE;
}

/* Binds a buffer to the constant's bytes cand inside memory imported at [base, end): the buffer
 * starts at the driver's alignment at or below the constant, which then begins `start` bytes in
 * (descriptors add it, so it must be a valid descriptor offset).  0 when it cannot. */
static int bind_into(vkg_vk_context *c, VkDeviceMemory memory, uint32_t type, uintptr_t base, uintptr_t end,
                     const candidate *cand, vkg_vk_buffer *out) {
    const VkPhysicalDeviceLimits *l = &c->props.limits;
    VkDeviceSize bytes = (VkDeviceSize)(cand->hi - cand->lo);
    VkBuffer probe = new_buffer(c, bytes);
    if (!probe) return 0;
    VkMemoryRequirements mr;
    vkGetBufferMemoryRequirements(c->device, probe, &mr);
    vkDestroyBuffer(c->device, probe, NULL);
    VkDeviceSize align = mr.alignment ? mr.alignment : 1, at = (VkDeviceSize)(cand->lo - base);
    VkDeviceSize start = at % align;
    /* Whole 16-byte texels past the end, as buffer views round up (never past the imported pages). */
    VkDeviceSize size = (start + bytes + 15) / 16 * 16;
    if (!(mr.memoryTypeBits & (1u << type)) || start % l->minStorageBufferOffsetAlignment ||
        start % l->minTexelBufferOffsetAlignment || base + (at - start) + size > end)
        return 0;
    VkBuffer buf = new_buffer(c, size);
    if (!buf) return 0;
    if (vkBindBufferMemory(c->device, buf, memory, at - start) != VK_SUCCESS) {
        vkDestroyBuffer(c->device, buf, NULL);
        return 0;
    }
    *out = (vkg_vk_buffer){.buffer = buf, .size = size, .start = start, .imported = 1};
    return 1;
}

/* Imports pages [base, end) and binds the candidates cand[0..n) into them; returns the memory
 * (VK_NULL_HANDLE when the driver refused the range or none of them could be bound). */
static VkDeviceMemory import_run(vkg_vk_context *c, uintptr_t base, uintptr_t end, const candidate *cand, int n,
                                 vkg_vk_buffer *bufs) {
    VkMemoryHostPointerPropertiesEXT hp = {.sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT};
    if (vkGetMemoryHostPointerPropertiesEXT(c->device, VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
                                            (void *)base, &hp) != VK_SUCCESS || !hp.memoryTypeBits) {
        return VK_NULL_HANDLE;
    }
    int type = vkg_vk_memory_type(c, hp.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT);
    if (type < 0) type = vkg_vk_memory_type(c, hp.memoryTypeBits, 0);
    if (type < 0) return VK_NULL_HANDLE;
    VkImportMemoryHostPointerInfoEXT imp = {
        .sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT,
        .handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
        .pHostPointer = (void *)base,
    };
    VkMemoryAllocateInfo ai = {
        .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
        .pNext = &imp,
        .allocationSize = (VkDeviceSize)(end - base),
        .memoryTypeIndex = (uint32_t)type,
    };
    VkDeviceMemory memory;
    if (vkAllocateMemory(c->device, &ai, NULL, &memory) != VK_SUCCESS) return VK_NULL_HANDLE;
    int bound = 0;
    for (int i = 0; i < n; i++) bound += bind_into(c, memory, (uint32_t)type, base, end, &cand[i], &bufs[cand[i].req]);
    if (!bound) {
        vkFreeMemory(c->device, memory, NULL);
        return VK_NULL_HANDLE;
    }
    return memory;
}

vkg_status vkg_vk_import_host(vkg_vk_context *c, int n, const vkg_vk_buffer_request *req, vkg_vk_buffer *bufs,
                              vkg_vk_memory *mem, vkg_error *err) {
    if (!c->host_import_alignment) return VKG_OK;
    uintptr_t page = (uintptr_t)c->host_import_alignment;
    candidate *cand = calloc((size_t)n + 1, sizeof *cand);
    VkDeviceMemory *blocks = calloc((size_t)n + 1, sizeof *blocks);
    if (!cand || !blocks) {
        free(cand);
        free(blocks);
        return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory importing constants");
    }
    int k = 0;
    for (int i = 0; i < n; i++)
        if (req[i].import_host && req[i].bytes)
            cand[k++] = (candidate){i, (uintptr_t)req[i].import_host, (uintptr_t)req[i].import_host + req[i].bytes};
    qsort(cand, (size_t)k, sizeof *cand, by_address);
    VkDeviceSize cap = c->max_allocation && c->max_allocation < IMPORT_CAP ? c->max_allocation : IMPORT_CAP;
    int n_blocks = 0;
    for (int first = 0; first < k;) {
        uintptr_t base = cand[first].lo / page * page, end = (cand[first].hi + page - 1) / page * page;
        int last = first + 1;
        for (; last < k; last++) {
            uintptr_t lo = cand[last].lo / page * page, hi = (cand[last].hi + page - 1) / page * page;
            if (lo > end || (hi > end ? hi : end) - base > cap) break;   /* a gap, or too large */
            if (hi > end) end = hi;
        }
        if (end - base <= cap) {
            VkDeviceMemory m = import_run(c, base, end, cand + first, last - first, bufs);
            if (m) blocks[n_blocks++] = m;
        }
        first = last;
    }
    free(cand);
    for (int i = 0; i < n; i++)
        if (bufs[i].imported) mem->imported_bytes += req[i].bytes;
    if (n_blocks) {
        mem->imported = blocks;
        mem->n_imported = n_blocks;
    } else {
        free(blocks);
    }
    return VKG_OK;
}
