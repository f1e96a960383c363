/* Device memory for a session: one VkBuffer per plan region, bound into a few large allocations
 * (never one allocation per tensor), and the staging path for buffers the host cannot map. */
#ifndef VKG_VK_MEMORY_H
#define VKG_VK_MEMORY_H

#include "vulkan/context.h"

typedef struct vkg_vk_buffer_request {
    VkDeviceSize bytes;
    int host;                /* 1: the host writes or reads it every run (inputs, outputs,
                                indices): host-visible memory; 0: device-local              */
    const void *import_host; /* constants: their host bytes, which host_import.c may import
                                instead of allocating (and the caller then copies nothing)  */
} vkg_vk_buffer_request;

typedef struct vkg_vk_buffer {
    VkBuffer buffer;
    VkDeviceSize size;       /* bytes of the VkBuffer (the request rounded up)               */
    uint8_t *mapped;         /* host address of byte 0, or NULL: reached through staging     */
    VkDeviceSize start;      /* the byte of the buffer where the region's byte 0 lies: 0, but
                                for an imported constant its offset from the alignment below */
    int imported;            /* bound to imported host memory: already holds its bytes       */
} vkg_vk_buffer;

typedef struct vkg_vk_memory {
    VkDeviceMemory *blocks;
    int n_blocks;
    VkDeviceSize total_bytes;
    VkDeviceMemory *imported;    /* host ranges imported for constants (host_import.c)      */
    int n_imported;
    VkDeviceSize imported_bytes; /* the constants' bytes read in place, never copied          */
    VkDeviceSize allocated_bytes;  /* of the blocks allocated so far: what freeing gives back */
} vkg_vk_memory;

/* Creates n buffers and the allocations behind them, importing constants where the device can
 * (vkg_vk_import_host) and allocating the rest.  force_staging leaves device-local buffers
 * unmapped even where the memory is host-visible (so the staging path can be tested on any
 * device).  what names the owner in messages. */
vkg_status vkg_vk_memory_create(vkg_vk_context *c, int n, const vkg_vk_buffer_request *req, int force_staging,
                                vkg_vk_buffer *bufs, vkg_vk_memory *mem, vkg_error *err);
/* host_import.c: binds each request that has import_host to the host bytes themselves where the
 * device's memory is the host's (VK_EXT_external_memory_host), marking its buffer imported; the
 * rest are left untouched, for vkg_vk_memory_create.  Fails only when out of host memory. */
vkg_status vkg_vk_import_host(vkg_vk_context *c, int n, const vkg_vk_buffer_request *req, vkg_vk_buffer *bufs,
                              vkg_vk_memory *mem, vkg_error *err);
void vkg_vk_memory_free(vkg_vk_context *c, int n, vkg_vk_buffer *bufs, vkg_vk_memory *mem);
/* Frees only mem's host-side arrays, leaving its Vulkan memory alone: for memory a hung device
 * may still use (vk_backend.c). */
void vkg_vk_memory_abandon(vkg_vk_memory *mem);

/* A host-visible buffer plus a command buffer, for copies to and from unmapped buffers. */
typedef struct vkg_vk_staging {
    VkBuffer buffer;
    VkDeviceMemory memory;
    VkDeviceSize memory_bytes;
    uint8_t *mapped;
    VkDeviceSize size;
    VkCommandBuffer cmd;
    VkFence fence;
    int pending;             /* a copy timed out: wait for it before reusing anything        */
} vkg_vk_staging;

/* Offsets are the region's (buffer_write and buffer_read add b->start).  Writes bytes at offset of b: a memcpy when b is mapped, else staged copies (created on first
 * use in st). */
vkg_status vkg_vk_buffer_write(vkg_vk_context *c, vkg_vk_staging *st, const vkg_vk_buffer *b, VkDeviceSize offset,
                               const void *data, size_t bytes, vkg_error *err);
/* Reads bytes at offset of b into data, or zero-fills them when data is NULL. */
vkg_status vkg_vk_buffer_read(vkg_vk_context *c, vkg_vk_staging *st, const vkg_vk_buffer *b, VkDeviceSize offset,
                              void *data, size_t bytes, vkg_error *err);
/* Copies count blocks of bytes from `from` to `to` (block i at from_offset + i * stride and
 * to_offset + i * stride): a memcpy each when both are mapped, else one submission of buffer
 * copies (st's command buffer, made on first use). */
vkg_status vkg_vk_buffer_copy(vkg_vk_context *c, vkg_vk_staging *st, const vkg_vk_buffer *from,
                              VkDeviceSize from_offset, const vkg_vk_buffer *to, VkDeviceSize to_offset,
                              VkDeviceSize stride, uint32_t count, VkDeviceSize bytes, vkg_error *err);
void vkg_vk_staging_free(vkg_vk_context *c, vkg_vk_staging *st);

#endif
