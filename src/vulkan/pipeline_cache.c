/* The on-disk pipeline cache.  The driver's data is wrapped with a length and a hash so that a
 * truncated or damaged file is recognised, and its Vulkan header (vendor, device, cache UUID) is
 * compared with the open device, so the driver is only ever handed bytes it wrote itself. */
#include "vulkan/pipelines.h"

#include "base/error.h"
#include "base/file_open.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_CACHE_FILE (256u << 20)   /* larger files are not ours: ignored */

static uint64_t fnv1a(const uint8_t *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const uint8_t *p) { return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32; }

static void put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

const void *vkg_vk_cache_payload(const VkPhysicalDeviceProperties *props, const void *file, size_t bytes,
                                 size_t *payload_bytes) {
    const uint8_t *f = file;
    if (bytes < VKG_VK_CACHE_PREFIX || memcmp(f, VKG_VK_CACHE_MAGIC, 8) != 0) return NULL;
    uint64_t n = get_u64(f + 8);
    if (n != bytes - VKG_VK_CACHE_PREFIX) return NULL;
    const uint8_t *data = f + VKG_VK_CACHE_PREFIX;
    if (fnv1a(data, (size_t)n) != get_u64(f + 16)) return NULL;
    /* VkPipelineCacheHeaderVersionOne, little-endian: headerSize, headerVersion, vendorID,
     * deviceID, pipelineCacheUUID[16]. */
    if (n < 32) return NULL;
    uint32_t header_size = get_u32(data);
    if (header_size < 32 || header_size > n) return NULL;
    if (get_u32(data + 4) != VK_PIPELINE_CACHE_HEADER_VERSION_ONE) return NULL;
    if (get_u32(data + 8) != props->vendorID || get_u32(data + 12) != props->deviceID) return NULL;
    if (memcmp(data + 16, props->pipelineCacheUUID, VK_UUID_SIZE) != 0) return NULL;
    *payload_bytes = (size_t)n;
    return data;
}

int vkg_vk_cache_path(const VkPhysicalDeviceProperties *props, char *path, size_t size) {
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    int n;
    if (xdg && xdg[0] == '/')
        n = snprintf(path, size, "%s/vkgraph/pipeline-cache-%04x-%04x.bin", xdg, props->vendorID, props->deviceID);
    else if (home && home[0] == '/')
        n = snprintf(path, size, "%s/.cache/vkgraph/pipeline-cache-%04x-%04x.bin", home, props->vendorID,
                     props->deviceID);
    else
        return 0;
    return n > 0 && (size_t)n < size;
}

/* The whole file in memory, or NULL (missing, unreadable, too large). */
static uint8_t *read_file(const char *path, size_t *bytes) {
    /* Anything but a regular file (a FIFO would block in open) counts as no cache. */
    struct stat info;
    const char *what;
    FILE *f = vkg_fopen_regular(path, &info, &what);
    if (!f) return NULL;
    uint8_t *buf = NULL;
    {
        long size = (long)info.st_size;
        if (size > 0 && (unsigned long)size <= MAX_CACHE_FILE) {
            buf = malloc((size_t)size);
            if (buf && fread(buf, 1, (size_t)size, f) != (size_t)size) {
                free(buf);
                buf = NULL;
            }
            *bytes = (size_t)size;
        }
    }
    fclose(f);
    return buf;
}

VkResult vkg_vk_cache_create(vkg_vk_context *c, const char *path, VkPipelineCache *out) {
    size_t bytes = 0, payload_bytes = 0;
    uint8_t *file = path ? read_file(path, &bytes) : NULL;
    const void *payload = file ? vkg_vk_cache_payload(&c->props, file, bytes, &payload_bytes) : NULL;
    VkPipelineCacheCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
        .initialDataSize = payload ? payload_bytes : 0,
        .pInitialData = payload,
    };
    VkResult r = vkCreatePipelineCache(c->device, &ci, NULL, out);
    if (r != VK_SUCCESS && payload) {
        /* The driver refused its own data: start empty rather than fail. */
        ci.initialDataSize = 0;
        ci.pInitialData = NULL;
        r = vkCreatePipelineCache(c->device, &ci, NULL, out);
    }
    free(file);
    return r;
}

/* mkdir -p for the directories above path. */
static int make_parent_dirs(const char *path) {
    char dir[1024];
    size_t n = strlen(path);
    if (n >= sizeof dir) return -1;
    memcpy(dir, path, n + 1);
    for (char *s = dir + 1; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) return -1;
        *s = '/';
    }
    return 0;
}

vkg_status vkg_vk_cache_write_file(const char *path, const void *payload, size_t bytes, vkg_error *err) {
    if (make_parent_dirs(path) != 0)
        return vkg_error_set(err, VKG_ERR_IO, "cannot create the directory for %s: %s", path, strerror(errno));
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) return vkg_error_set(err, VKG_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
    uint8_t prefix[VKG_VK_CACHE_PREFIX];
    memcpy(prefix, VKG_VK_CACHE_MAGIC, 8);
    put_u64(prefix + 8, bytes);
    put_u64(prefix + 16, fnv1a(payload, bytes));
    int ok = fwrite(prefix, 1, sizeof prefix, f) == sizeof prefix && fwrite(payload, 1, bytes, f) == bytes;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        return vkg_error_set(err, VKG_ERR_IO, "cannot write the pipeline cache %s", path);
    }
    return VKG_OK;
}

vkg_status vkg_vk_cache_save(vkg_vk_context *c, VkPipelineCache cache, const char *path, vkg_error *err) {
    size_t bytes = 0;
    VkResult r = vkGetPipelineCacheData(c->device, cache, &bytes, NULL);
    if (r != VK_SUCCESS) return vkg_vk_fail(err, r, "vkGetPipelineCacheData");
    if (bytes == 0) return VKG_OK;
    void *data = malloc(bytes);
    if (!data) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory saving the pipeline cache");
    r = vkGetPipelineCacheData(c->device, cache, &bytes, data);
    vkg_status st = r == VK_SUCCESS ? vkg_vk_cache_write_file(path, data, bytes, err)
                                    : vkg_vk_fail(err, r, "vkGetPipelineCacheData");
    free(data);
    return st;
}
