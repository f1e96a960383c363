/* The on-disk pipeline cache (vulkan/pipeline_cache.c): what the library hands the driver only
 * when the wrapper's length and hash agree and the Vulkan header names this very device.  Half
 * the inputs (the first byte's low bit) get their hash made right before the check, so the
 * checks after it are reached too.  Whatever the bytes, the payload is either refused or lies
 * inside the file, holds at least its 32-byte header and names the device; and a payload
 * written with vkg_vk_cache_write_file is always accepted back. */
#include "fuzz.h"

#include "vulkan/pipelines.h"

#include <stdlib.h>
#include <string.h>

static uint64_t fnv1a(const uint8_t *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* lavapipe's identity, as the seed files carry it. */
static VkPhysicalDeviceProperties device(void) {
    VkPhysicalDeviceProperties p;
    memset(&p, 0, sizeof p);
    p.vendorID = 0x10005;
    p.deviceID = 0;
    memcpy(p.pipelineCacheUUID, "vkgraph-fuzzuuid", VK_UUID_SIZE);
    return p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    VkPhysicalDeviceProperties props = device();
    uint8_t *file = calloc(1, size + 1);
    FUZZ_CHECK(file != NULL);
    memcpy(file, data, size);
    if (size >= VKG_VK_CACHE_PREFIX && (data[0] & 1)) {
        uint64_t h = fnv1a(file + VKG_VK_CACHE_PREFIX, size - VKG_VK_CACHE_PREFIX);
        for (int i = 0; i < 8; i++) file[16 + i] = (uint8_t)(h >> (8 * i));
    }
    size_t payload_bytes = 0;
    const uint8_t *payload = vkg_vk_cache_payload(&props, file, size, &payload_bytes);
    if (payload) {
        FUZZ_CHECK(payload >= file && payload + payload_bytes == file + size);
        FUZZ_CHECK(payload_bytes >= 32);
        FUZZ_CHECK(memcmp(payload + 16, props.pipelineCacheUUID, VK_UUID_SIZE) == 0);
    }
    /* Wrapped by the library's own writer, any payload with a matching header comes back. */
    if (size >= 32) {
        uint8_t *own = malloc(size);
        FUZZ_CHECK(own != NULL);
        memcpy(own, data, size);
        const uint32_t header[4] = {32, VK_PIPELINE_CACHE_HEADER_VERSION_ONE, props.vendorID, props.deviceID};
        for (int w = 0; w < 4; w++)
            for (int b = 0; b < 4; b++) own[4 * w + b] = (uint8_t)(header[w] >> (8 * b));
        memcpy(own + 16, props.pipelineCacheUUID, VK_UUID_SIZE);
        vkg_error err;
        const char *path = fuzz_write_file("pipeline-cache.bin", "", 0);
        FUZZ_CHECK(vkg_vk_cache_write_file(path, own, size, &err) == VKG_OK);
        FILE *f = fopen(path, "rb");
        FUZZ_CHECK(f != NULL);
        uint8_t *back = malloc(size + VKG_VK_CACHE_PREFIX + 1);
        FUZZ_CHECK(back != NULL);
        size_t n = fread(back, 1, size + VKG_VK_CACHE_PREFIX + 1, f);
        fclose(f);
        FUZZ_CHECK(n == size + VKG_VK_CACHE_PREFIX);
        size_t got = 0;
        const uint8_t *p = vkg_vk_cache_payload(&props, back, n, &got);
        FUZZ_CHECK(p != NULL && got == size && memcmp(p, own, size) == 0);
        free(back);
        free(own);
    }
    free(file);
    return 0;
}
