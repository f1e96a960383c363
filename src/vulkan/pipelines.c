/* Pipelines made on first use, specialised with the device's tuning, and the tuning itself. */
#include "vulkan/pipelines.h"

#include "base/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct vkg_vk_pipelines {
    VkPipelineCache cache;
    char cache_path[1024];          /* "" when the disk cache is disabled                */
    int made;                       /* pipelines created since opening: save the cache   */
    VkShaderModule modules[VKG_SH_COUNT];
    vkg_vk_pipeline **list;         /* pointers, so entries never move                   */
    int n, cap;
};

static const struct {
    const char *file;
    vkg_kernel kernel;
    uint32_t texel_mask;
    int texel_vec4;
    vkg_vk_shader b16;              /* the variant for 16-bit B (itself for those variants)   */
} shader_info[] = {
#define VKG_SHADER(SHADER, file, ENUM, texel_mask, texel_vec4, b16) \
    [VKG_SH_##SHADER] = {#file, VKG_KERNEL_##ENUM, texel_mask, texel_vec4, VKG_SH_##b16},
#include "graph/kernels.def"
};
_Static_assert(sizeof shader_info / sizeof shader_info[0] == VKG_SH_COUNT, "one entry per shader");

const char *vkg_vk_shader_file(vkg_vk_shader s) { return shader_info[s].file; }
vkg_kernel vkg_vk_shader_kernel(vkg_vk_shader s) { return shader_info[s].kernel; }
uint32_t vkg_vk_shader_bindings(vkg_vk_shader s) { return (uint32_t)vkg_kernel_binding_count(shader_info[s].kernel); }
uint32_t vkg_vk_shader_texel_mask(vkg_vk_shader s) { return shader_info[s].texel_mask; }
int vkg_vk_shader_texel_vec4(vkg_vk_shader s) { return shader_info[s].texel_vec4; }
uint32_t vkg_vk_shader_push_bytes(vkg_vk_shader s) { return vkg_kernel_params_bytes(shader_info[s].kernel); }
vkg_vk_shader vkg_vk_shader_b16_variant(vkg_vk_shader s) { return shader_info[s].b16; }
int vkg_vk_shader_b16(vkg_vk_shader s) { return shader_info[s].b16 == s; }

static uint32_t clamp_u32(uint32_t v, uint32_t lo, uint32_t hi) { return v < lo ? lo : v > hi ? hi : v; }

static int texel_format_ok(const vkg_vk_context *c, VkFormat f) {
    VkFormatProperties fp;
    vkGetPhysicalDeviceFormatProperties(c->phys, f, &fp);
    return (fp.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT) != 0;
}

uint32_t vkg_vk_max_workgroup_x(const vkg_vk_context *c) {
    const VkPhysicalDeviceLimits *l = &c->props.limits;
    return l->maxComputeWorkGroupSize[0] < l->maxComputeWorkGroupInvocations ? l->maxComputeWorkGroupSize[0]
                                                                             : l->maxComputeWorkGroupInvocations;
}

uint32_t vkg_vk_subgroup_size(const vkg_vk_context *c) {
    return c->subgroup.subgroupSize ? c->subgroup.subgroupSize : 1;
}

void vkg_vk_tuning_default(const vkg_vk_context *c, vkg_vk_tuning *t) {
    const VkPhysicalDeviceLimits *l = &c->props.limits;
    uint32_t max_x = vkg_vk_max_workgroup_x(c);
    uint32_t sg = vkg_vk_subgroup_size(c);
    int cpu = c->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
    int texel_ok = texel_format_ok(c, VK_FORMAT_R32_SFLOAT) && texel_format_ok(c, VK_FORMAT_R32G32B32A32_SFLOAT);
    int texel16_ok = texel_format_ok(c, VK_FORMAT_R16_UINT) && texel_format_ok(c, VK_FORMAT_R16G16B16A16_UINT);
    int texel_u4_ok = texel_format_ok(c, VK_FORMAT_R32G32B32A32_UINT);

    memset(t, 0, sizeof *t);
    /* A software rasteriser runs a workgroup as SIMD loops on one thread and spreads workgroups
     * over its threads: small workgroups, many of them.  Its storage-buffer and shared-memory
     * loads are slow and texel fetches fast, so matmul reads vec4 texels into large register
     * blocks.  A GPU gets wide workgroups, shared-memory tiles and coalesced storage-buffer
     * loads. */
    t->elementwise_wg = clamp_u32(256, 1, max_x);
    t->row_wg = clamp_u32(cpu ? sg : 256, 1, max_x);
    /* Each workgroup costs a software rasteriser about 20 us, but one element of these shaders
     * costs it tens of ns (loads lane by lane, index arithmetic): at least 1024 elements a
     * workgroup spreads a decoding step of 8 sequences over the threads, where a one-row step's
     * norms and rotations stay one workgroup.  Profiled on llvmpipe (2 threads), 8 rows, against
     * 8192 elements a workgroup: GPT-2 124M's layer norm (768 wide) 241-310 -> 195-219 us, its
     * cache write (12288 elements) 242-305 -> 220-250 us; SmolLM2-135M's RMS norm (576 wide)
     * 164-201 -> 108-141 us, its rotation and cache write 285-312 -> 210-229 us.  (2048:
     * SmolLM2's 139-160 and 266-279 us, GPT-2's the same.) */
    t->max_groups = cpu ? 16 : 0;
    /* A decode step's attention has a workgroup per key/value head (8 for Llama-3.2-1B), each
     * walking the whole cache: a GPU with tens of compute units would leave most idle for the
     * one step whose reads grow with the context.  Chunks of 256 keys give it S / 256 times as
     * many workgroups (64 at 2048 tokens).  A software rasteriser already spreads the heads'
     * lanes over its threads and pays ~50 us for the second dispatch: not there. */
    t->attn_chunk_keys = cpu ? 0 : 256;
    t->min_group_work = cpu ? 1024 : 0;
    /* A run is waited for one submission at a time, each within the device's timeout (60 s by
     * default), and a slow device must not count a long prompt as a hung queue: lavapipe
     * prefills TinyLlama-1.1B's shapes at about 35 GFLOP/s, 2047 tokens in two minutes.  2^35
     * multiply-adds (69 GFLOP, about 2 s there) a submission on a CPU device, 2^40 on a GPU
     * (2.2 TFLOP, a few seconds on an integrated one, milliseconds on a discrete one, where a
     * submission's fixed cost of tens of microseconds then weighs nothing). */
    t->submit_work = cpu ? (uint64_t)1 << 35 : (uint64_t)1 << 40;
    t->matmul_texel = cpu && texel_ok;
    t->texel_16bit = texel16_ok;
    t->texel_16bit_x8 = texel16_ok && texel_u4_ok;
    if (cpu) {
        t->mm_wg_x = 8, t->mm_wg_y = 8, t->mm_tm = 8, t->mm_tn = 8, t->mm_bk = 8;
        /* 16 rows per invocation once A has a workgroup's worth of them (M >= 128): each fetch
         * of B then feeds twice the multiply-adds.  Measured on llvmpipe, GPT-2 124M f16
         * forward: T = 128 845 -> 722 ms, T = 256 1668 -> 1567 ms, T = 1024 7211 -> 6738 ms
         * (f32 T = 256 2018 -> 1844 ms); at T = 8 it would be 1.7x slower, at T = 64 even. */
        t->mm_tm_tall = 16;
        /* M == 1 through the vec4 texel shaders (where neither matrix-vector texel shader takes
         * the layout): B along n, 4 columns (one vec4) per invocation keeps the fetched rows in
         * registers (wider blocks spill on 8-wide AVX2); along k, mm_tn rows each.  16
         * invocations per workgroup: 64 columns or 128 rows (32 left 3 workgroups of 256 rows
         * for a [3072, 768] product, one thread doing two: 5-15% slower, measured on
         * lavapipe). */
        t->mv_wg = 16, t->mv_cols = 16, t->mv_tn = 4;
        /* M == 1 with B along n (matvec_texel.glsl): 32 invocations per slice of k x 4 texels
         * of 16 bytes sweep 2 KiB of each row together (the barrier after every four rows), two
         * slices of k per workgroup; measured on llvmpipe (8 lanes) at GPT-2's [768, 2304] to
         * [3072, 768] weights, 2.3x to 2.8x less CPU time than the vec4 texel shader's walk. */
        t->matvec_texel = texel_ok && texel_u4_ok;
        t->mvx_wg = 64, t->mvx_split = 2, t->mvx_tn = 4, t->mvx_min_groups = 2, t->mvx_sync = 1;
        /* 2 to 8 rows keep one texel of columns per invocation (their sums fill the registers),
         * so GPT-2's [3072, 768] is 3 workgroups of 2 slices for 2 threads; 8 slices of k make
         * it 12.  Measured on llvmpipe at 8 rows, GPT-2's layers: 7% less matmul time than 2
         * slices (16 and 32 slices: the same as 8). */
        t->mvx_split_rows = 8;
        /* M == 1 with B along k (matvec_texelt.glsl, sizes set below for every device). */
        t->matvec_texelt = texel_ok;
    } else {
        t->mm_wg_x = 16, t->mm_wg_y = 16, t->mm_tm = 4, t->mm_tn = 4, t->mm_bk = 16;
        t->mm_tm_tall = t->mm_tm;
        t->mv_wg = 256, t->mv_cols = 32, t->mv_tn = 4;
        t->mvx_wg = 64, t->mvx_split = 1, t->mvx_tn = 1, t->mvx_min_groups = 1, t->mvx_sync = 0;
        t->mvx_split_rows = 1;
    }
    /* matvec_texelt.glsl: two subgroups per workgroup, each taking a span of 8 blocks of 8 rows,
     * 128 rows per workgroup (6 to 24 workgroups for GPT-2's layers, 393 for its head); a sweep
     * around these on llvmpipe was flat. */
    t->mvt_wg = 2 * sg, t->mvt_rows = sg < 8 ? sg : 8, t->mvt_blocks = 8, t->mvt_spans = 2;
    if (c->opts.matmul == VKG_MATMUL_SHADERS_TEXEL && texel_ok) t->matmul_texel = 1;
    if (c->opts.matmul == VKG_MATMUL_SHADERS_TILED) t->matmul_texel = 0;
    /* Devices with small limits: shrink until the tuning fits. */
    while (t->mm_wg_x * t->mm_wg_y > l->maxComputeWorkGroupInvocations && t->mm_wg_x > 1) {
        t->mm_wg_x /= 2;
        if (t->mm_wg_x * t->mm_wg_y > l->maxComputeWorkGroupInvocations && t->mm_wg_y > 1) t->mm_wg_y /= 2;
    }
    while (t->mv_wg > max_x && t->mv_wg > t->mv_cols) t->mv_wg /= 2;
    while ((t->mvx_wg > max_x || t->mvx_wg * t->mvx_tn * 8 * 4 > l->maxComputeSharedMemorySize) &&
           t->mvx_wg > t->mvx_split && t->mvx_wg > t->mvx_split_rows)
        t->mvx_wg /= 2;
    if (t->mv_wg > max_x) t->mv_wg = t->mv_cols = max_x;
    while (t->mvt_wg > max_x && t->mvt_wg > sg) t->mvt_wg -= sg;
    while ((t->mm_wg_y * t->mm_tm + t->mm_wg_x * t->mm_tn) * t->mm_bk * 4 > l->maxComputeSharedMemorySize &&
           t->mm_bk > 1)
        t->mm_bk /= 2;
}

vkg_status vkg_vk_tuning_check(const vkg_vk_context *c, const vkg_vk_tuning *t, vkg_error *err) {
    const VkPhysicalDeviceLimits *l = &c->props.limits;
    uint32_t inv = l->maxComputeWorkGroupInvocations, shared = l->maxComputeSharedMemorySize;
    uint32_t max_x = vkg_vk_max_workgroup_x(c);
    const struct { const char *name; uint32_t value, max; } checks[] = {
        {"elementwise_wg", t->elementwise_wg, max_x},
        {"row_wg", t->row_wg, max_x},
        {"row_wg shared bytes", t->row_wg * 4, shared},
        {"mm_wg_x", t->mm_wg_x, l->maxComputeWorkGroupSize[0]},
        {"mm_wg_y", t->mm_wg_y, l->maxComputeWorkGroupSize[1]},
        {"mm_wg_x * mm_wg_y", t->mm_wg_x * t->mm_wg_y, inv},
        {"mm_tm", t->mm_tm, 16},
        {"mm_tn", t->mm_tn, 16},
        {"mm_bk", t->mm_bk, 64},
        {"tiled matmul shared bytes", (t->mm_wg_y * t->mm_tm + t->mm_wg_x * t->mm_tn) * t->mm_bk * 4, shared},
        {"mv_wg", t->mv_wg, max_x},
        {"mv_cols", t->mv_cols, t->mv_wg},
        {"mv_wg shared bytes", t->mv_wg * 4, shared},
        {"mv_tn", t->mv_tn, 16},
        {"texel matmul shared bytes", t->mm_wg_x * t->mm_wg_y * t->mm_tm * t->mm_tn * 4, shared},
        {"mm_tm_tall", t->mm_tm_tall, 16},
        {"texel matmul shared bytes (tall)", t->mm_wg_x * t->mm_wg_y * t->mm_tm_tall * t->mm_tn * 4, shared},
        {"texel matrix-vector shared bytes", t->mv_wg * t->mv_tn * 4, shared},
        {"mvx_wg", t->mvx_wg, max_x},
        {"mvx_split", t->mvx_split, t->mvx_wg},
        {"mvx_split_rows", t->mvx_split_rows, t->mvx_wg},
        {"mvx_tn", t->mvx_tn, 16},
        {"mvx_min_groups", t->mvx_min_groups, UINT32_MAX},
        {"matvec texel shared bytes", t->mvx_wg * t->mvx_tn * 8 * 4, shared},
        {"mvt_wg", t->mvt_wg, max_x},
        {"mvt_rows", t->mvt_rows, 64},
        {"mvt_blocks", t->mvt_blocks, 64},
        {"mvt_spans", t->mvt_spans, 64},
    };
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++)
        if (checks[i].value == 0 || checks[i].value > checks[i].max)
            return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "Vulkan tuning: %s = %u is outside 1..%u on %s",
                                 checks[i].name, checks[i].value, checks[i].max, c->props.deviceName);
    if (t->mvx_wg % t->mvx_split != 0 || t->mvx_wg % t->mvx_split_rows != 0)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                             "Vulkan tuning: mvx_wg (%u) must be a multiple of mvx_split (%u) and of mvx_split_rows "
                             "(%u)", t->mvx_wg, t->mvx_split, t->mvx_split_rows);
    const uint32_t sg = vkg_vk_subgroup_size(c);
    if (t->mvt_wg % sg != 0)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                             "Vulkan tuning: mvt_wg (%u) must be a multiple of the subgroup size (%u)", t->mvt_wg, sg);
    if (t->submit_work == 0)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT, "Vulkan tuning: submit_work must be at least 1");
    if (t->attn_chunk_keys != 0 && t->attn_chunk_keys < sg)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                             "Vulkan tuning: attn_chunk_keys (%u) must be 0 or at least the subgroup size (%u)",
                             t->attn_chunk_keys, sg);
    if (t->mv_wg % t->mv_cols != 0)
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                             "Vulkan tuning: mv_wg (%u) must be a multiple of mv_cols (%u)", t->mv_wg, t->mv_cols);
    if (t->matmul_texel && (t->mm_tn % 4 != 0 || t->mv_tn % 4 != 0))
        return vkg_error_set(err, VKG_ERR_INVALID_ARGUMENT,
                             "Vulkan tuning: mm_tn (%u) and mv_tn (%u) must be multiples of 4 for the vec4 texel "
                             "matmul", t->mm_tn, t->mv_tn);
    return VKG_OK;
}

vkg_status vkg_vk_pipelines_new(vkg_vk_context *c, vkg_vk_pipelines **out, vkg_error *err) {
    *out = NULL;
    vkg_vk_pipelines *ps = calloc(1, sizeof *ps);
    if (!ps) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for pipelines");
    if (c->opts.no_pipeline_cache || !vkg_vk_cache_path(&c->props, ps->cache_path, sizeof ps->cache_path))
        ps->cache_path[0] = '\0';
    VkResult r = vkg_vk_cache_create(c, ps->cache_path[0] ? ps->cache_path : NULL, &ps->cache);
    if (r != VK_SUCCESS) {
        free(ps);
        return vkg_vk_fail(err, r, "vkCreatePipelineCache");
    }
    *out = ps;
    return VKG_OK;
}

void vkg_vk_pipelines_free(vkg_vk_context *c, vkg_vk_pipelines *ps) {
    if (!ps) return;
    if (ps->made && ps->cache_path[0]) {
        vkg_error e;
        if (vkg_vk_cache_save(c, ps->cache, ps->cache_path, &e) != VKG_OK && !c->quiet)
            fprintf(stderr, "vkgraph: note: pipeline cache not saved: %s\n", e.message);
    }
    for (int i = 0; i < ps->n; i++) {
        vkg_vk_pipeline *p = ps->list[i];
        vkDestroyPipeline(c->device, p->pipeline, NULL);
        vkDestroyPipelineLayout(c->device, p->layout, NULL);
        vkDestroyDescriptorSetLayout(c->device, p->set_layout, NULL);
        free(p);
    }
    free(ps->list);
    for (int s = 0; s < VKG_SH_COUNT; s++)
        if (ps->modules[s]) vkDestroyShaderModule(c->device, ps->modules[s], NULL);
    vkDestroyPipelineCache(c->device, ps->cache, NULL);
    free(ps);
}

int vkg_vk_pipeline_count(const vkg_vk_pipelines *ps) { return ps ? ps->n : 0; }

static vkg_status get_module(vkg_vk_context *c, vkg_vk_shader s, VkShaderModule *out, vkg_error *err) {
    vkg_vk_pipelines *ps = c->pipelines;
    if (!ps->modules[s]) {
        const vkg_spirv *spv = vkg_spirv_table;
        while (spv->name && strcmp(spv->name, shader_info[s].file) != 0) spv++;
        if (!spv->name)
            return vkg_error_set(err, VKG_ERR_UNSUPPORTED, "shader %s.comp is not embedded in this build",
                                 shader_info[s].file);
        VkShaderModuleCreateInfo ci = {
            .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
            .codeSize = spv->bytes,
            .pCode = spv->code,
        };
        VkResult r = vkCreateShaderModule(c->device, &ci, NULL, &ps->modules[s]);
        if (r != VK_SUCCESS) {
            ps->modules[s] = VK_NULL_HANDLE;
            return vkg_vk_fail(err, r, "vkCreateShaderModule");
        }
    }
    *out = ps->modules[s];
    return VKG_OK;
}

/* A shader binds up to VKG_MAX_BINDINGS buffers, more than the 4 storage buffers per stage that
 * Vulkan promises: a device with fewer is refused by name rather than failing somewhere inside
 * the driver.  Uniform texel buffers count against the sampled images. */
static vkg_status check_stage_limits(const vkg_vk_context *c, vkg_vk_shader s, vkg_error *err) {
    const VkPhysicalDeviceLimits *l = &c->props.limits;
    const uint32_t n = vkg_vk_shader_bindings(s);
    uint32_t texel = 0;
    for (uint32_t i = 0; i < n; i++) texel += (shader_info[s].texel_mask >> i) & 1u;
    if (n - texel <= l->maxPerStageDescriptorStorageBuffers && texel <= l->maxPerStageDescriptorSampledImages &&
        n <= l->maxPerStageResources)
        return VKG_OK;
    return vkg_error_set(err, VKG_ERR_UNSUPPORTED,
                         "shader %s binds %u storage buffers and %u uniform texel buffers, but %s allows %u, %u and "
                         "%u resources in all per shader stage", shader_info[s].file, n - texel, texel,
                         c->props.deviceName, l->maxPerStageDescriptorStorageBuffers,
                         l->maxPerStageDescriptorSampledImages, l->maxPerStageResources);
}

static vkg_status make_layouts(vkg_vk_context *c, vkg_vk_pipeline *p, vkg_error *err) {
    VkDescriptorSetLayoutBinding b[VKG_MAX_BINDINGS];
    uint32_t n = vkg_vk_shader_bindings(p->shader);
    vkg_status st = check_stage_limits(c, p->shader, err);
    if (st != VKG_OK) return st;
    for (uint32_t i = 0; i < n; i++)
        b[i] = (VkDescriptorSetLayoutBinding){
            .binding = i,
            .descriptorType = (shader_info[p->shader].texel_mask >> i) & 1 ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER
                                                                           : VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
            .descriptorCount = 1,
            .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        };
    VkDescriptorSetLayoutCreateInfo dci = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .bindingCount = n,
        .pBindings = b,
    };
    VkResult r = vkCreateDescriptorSetLayout(c->device, &dci, NULL, &p->set_layout);
    if (r != VK_SUCCESS) return vkg_vk_fail(err, r, "vkCreateDescriptorSetLayout");
    VkPushConstantRange range = {
        .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
        .offset = 0,
        .size = vkg_vk_shader_push_bytes(p->shader),
    };
    VkPipelineLayoutCreateInfo lci = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
        .setLayoutCount = 1,
        .pSetLayouts = &p->set_layout,
        .pushConstantRangeCount = 1,
        .pPushConstantRanges = &range,
    };
    r = vkCreatePipelineLayout(c->device, &lci, NULL, &p->layout);
    if (r != VK_SUCCESS) return vkg_vk_fail(err, r, "vkCreatePipelineLayout");
    return VKG_OK;
}

static vkg_status make_pipeline(vkg_vk_context *c, vkg_vk_pipeline *p, vkg_error *err) {
    VkShaderModule module = VK_NULL_HANDLE;
    vkg_status st = get_module(c, p->shader, &module, err);
    if (st == VKG_OK) st = make_layouts(c, p, err);
    if (st != VKG_OK) return st;
    VkSpecializationMapEntry entries[VKG_VK_MAX_SPEC];
    for (uint32_t i = 0; i < p->n_spec; i++)
        entries[i] = (VkSpecializationMapEntry){.constantID = i, .offset = 4 * i, .size = 4};
    VkSpecializationInfo spec = {
        .mapEntryCount = p->n_spec,
        .pMapEntries = entries,
        .dataSize = 4 * p->n_spec,
        .pData = p->spec,
    };
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {
            .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
            .stage = VK_SHADER_STAGE_COMPUTE_BIT,
            .module = module,
            .pName = "main",
            .pSpecializationInfo = &spec,
        },
        .layout = p->layout,
    };
    VkResult r = vkCreateComputePipelines(c->device, c->pipelines->cache, 1, &ci, NULL, &p->pipeline);
    if (r != VK_SUCCESS) {
        p->pipeline = VK_NULL_HANDLE;
        char what[96];
        snprintf(what, sizeof what, "creating the %s pipeline", shader_info[p->shader].file);
        return vkg_vk_fail(err, r, what);
    }
    return VKG_OK;
}

vkg_status vkg_vk_pipeline_get(vkg_vk_context *c, vkg_vk_shader s, const uint32_t *spec_in, uint32_t n_spec,
                               const vkg_vk_pipeline **out, vkg_error *err) {
    vkg_vk_pipelines *ps = c->pipelines;
    uint32_t spec[VKG_VK_MAX_SPEC] = {0};
    if (n_spec > VKG_VK_MAX_SPEC) n_spec = VKG_VK_MAX_SPEC;
    memcpy(spec, spec_in, n_spec * sizeof *spec);
    for (int i = 0; i < ps->n; i++) {
        const vkg_vk_pipeline *p = ps->list[i];
        if (p->shader == s && p->n_spec == n_spec && memcmp(p->spec, spec, sizeof spec) == 0) {
            *out = p;
            return VKG_OK;
        }
    }
    vkg_status st = vkg_vk_tuning_check(c, &c->tuning, err);
    if (st != VKG_OK) return st;
    if (ps->n == ps->cap) {
        int cap = ps->cap ? 2 * ps->cap : 16;
        vkg_vk_pipeline **list = realloc(ps->list, (size_t)cap * sizeof *list);
        if (!list) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for pipelines");
        ps->list = list;
        ps->cap = cap;
    }
    vkg_vk_pipeline *p = calloc(1, sizeof *p);
    if (!p) return vkg_error_set(err, VKG_ERR_OUT_OF_MEMORY, "out of memory for pipelines");
    p->shader = s;
    p->n_spec = n_spec;
    memcpy(p->spec, spec, sizeof spec);
    st = make_pipeline(c, p, err);
    if (st != VKG_OK) {
        if (p->pipeline) vkDestroyPipeline(c->device, p->pipeline, NULL);
        if (p->layout) vkDestroyPipelineLayout(c->device, p->layout, NULL);
        if (p->set_layout) vkDestroyDescriptorSetLayout(c->device, p->set_layout, NULL);
        free(p);
        return st;
    }
    ps->list[ps->n++] = p;
    ps->made = 1;
    *out = p;
    return VKG_OK;
}
