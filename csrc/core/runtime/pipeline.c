/* pipeline.c — what a dispatch binds: compute pipelines built lazily from embedded
 * SPIR-V and cached per (shader, specialization constants, required subgroup
 * size), and the descriptor sets that hold its buffers. Below exec.c: nothing
 * here records or submits work. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helios_kernels.h"
#include "internal.h"

/* The driver's statistics for the pipeline's first executable (registers,
 * shared memory, binary size... whatever it reports), where it offers them. */
static void capture_stats(hl_device *dev, hl_pipeline *p) {
    PFN_vkGetPipelineExecutableStatisticsKHR get_stats = (PFN_vkGetPipelineExecutableStatisticsKHR)vkGetDeviceProcAddr(
        dev->device, "vkGetPipelineExecutableStatisticsKHR");
    if (!get_stats) return;
    VkPipelineExecutableInfoKHR ei = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR, .pipeline = p->pipeline, .executableIndex = 0};
    VkPipelineExecutableStatisticKHR st[HL_MAX_STATS];
    uint32_t n = HL_MAX_STATS;
    for (uint32_t i = 0; i < n; i++)
        st[i] = (VkPipelineExecutableStatisticKHR){.sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR};
    VkResult vr = get_stats(dev->device, &ei, &n, st);
    if (vr != VK_SUCCESS && vr != VK_INCOMPLETE) return; /* statistics are a report, not a need */
    for (uint32_t i = 0; i < n && i < HL_MAX_STATS; i++) {
        hl_kernel_stat *o = &p->stats.items[p->stats.n++];
        snprintf(o->name, sizeof o->name, "%s", st[i].name);
        switch (st[i].format) {
            case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
                o->value = st[i].value.b32;
                break;
            case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
                o->value = (double)st[i].value.i64;
                break;
            case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
                o->value = (double)st[i].value.u64;
                break;
            default:
                o->value = st[i].value.f64;
                break;
        }
    }
}

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *b = data;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

/* The pipeline's identity: its SPIR-V, specialization constants and subgroup size. */
static uint64_t code_digest(const hl_spirv *code, const uint32_t *spec, uint32_t n_spec, uint32_t subgroup) {
    uint64_t h = fnv1a(0xcbf29ce484222325ULL, code->code, code->size_bytes);
    if (n_spec) h = fnv1a(h, spec, n_spec * sizeof *spec);
    return fnv1a(h, &subgroup, sizeof subgroup);
}

/* The pipeline object of (shader, constants, subgroup size), compiled into cache.
 * counted: a pipeline Helios keeps (the fault injection's and the telemetry's
 * vkCreateComputePipelines); a transient one made to read its machine code is not. */
static hl_status create(hl_device *dev, hl_shader shader, const uint32_t *spec, uint32_t n_spec,
                        uint32_t required_subgroup, VkPipelineCache cache, int counted, VkPipeline *out,
                        hl_error *err) {
    hl_status st = HL_OK;
    VkShaderModule module = VK_NULL_HANDLE;
    const hl_spirv *code = &hl_spirv_table[shader];
    VkShaderModuleCreateInfo smci = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = code->size_bytes, .pCode = code->code};
    HL_VK(vkCreateShaderModule(dev->device, &smci, NULL, &module));
    VkSpecializationMapEntry entries[HL_MAX_SPEC];
    for (uint32_t i = 0; i < n_spec; i++)
        entries[i] = (VkSpecializationMapEntry){
            .constantID = i, .offset = i * (uint32_t)sizeof(uint32_t), .size = sizeof(uint32_t)};
    VkSpecializationInfo si = {
        .mapEntryCount = n_spec, .pMapEntries = entries, .dataSize = n_spec * sizeof(uint32_t), .pData = spec};
    /* Cooperative matrices need full subgroups of a known size. */
    VkPipelineShaderStageRequiredSubgroupSizeCreateInfo rss = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO,
        .requiredSubgroupSize = required_subgroup};
    VkComputePipelineCreateInfo cpci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .flags = !dev->caps.has_pipeline_stats ? 0
                 : hl_pipeline_ir_dir()        ? VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR |
                                              VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR
                                        : VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .pNext = required_subgroup ? &rss : NULL,
                  .flags = required_subgroup ? VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT : 0,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                  .module = module,
                  .pName = "main",
                  .pSpecializationInfo = &si},
        .layout = dev->pipe_layout};
    if (counted)
        HL_VK_FAULT(HL_FAULT_PIPELINE, vkCreateComputePipelines(dev->device, cache, 1, &cpci, NULL, out));
    else
        HL_VK(vkCreateComputePipelines(dev->device, cache, 1, &cpci, NULL, out));
fail:
    if (module) vkDestroyShaderModule(dev->device, module, NULL);
    return st;
}

hl_status hl_pipeline_get(hl_device *dev, hl_shader shader, const uint32_t *spec, uint32_t n_spec,
                          uint32_t required_subgroup, hl_pipeline **out, hl_error *err) {
    hl_status st = HL_OK;
    hl_pipeline *p = NULL;
    if (n_spec > HL_MAX_SPEC) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "too many specialization constants");
    if ((unsigned)shader >= HL_SHADER_COUNT)
        return hl_fail(err, HL_ERR_UNSUPPORTED, "no shader permutation for these types in this build");
    for (hl_pipeline *it = dev->pipelines; it; it = it->next) {
        if (it->shader == shader && it->n_spec == n_spec && it->required_subgroup == required_subgroup &&
            (n_spec == 0 || memcmp(it->spec, spec, n_spec * sizeof *spec) == 0)) {
            *out = it;
            return HL_OK;
        }
    }
    const hl_spirv *code = &hl_spirv_table[shader];
    if (!code->size_bytes)
        return hl_fail(err, HL_ERR_UNSUPPORTED,
                       "kernel %s is not in this build: the glslc it was built with lacks %s "
                       "(rebuild with a newer glslc, e.g. shaderc 2026.4)",
                       code->name, code->missing);

    double t0 = hl_now_ms();
    p = calloc(1, sizeof *p);
    if (!p) return hl_fail(err, HL_ERR_OUT_OF_MEMORY, "out of host memory");
    HL_TRY(create(dev, shader, spec, n_spec, required_subgroup, dev->store.cache, 1, &p->pipeline, err));
    dev->tel.live_pipelines++;
    p->shader = shader;
    if (n_spec) memcpy(p->spec, spec, n_spec * sizeof *spec); /* spec may be NULL when empty */
    p->n_spec = n_spec;
    p->required_subgroup = required_subgroup;
    p->next = dev->pipelines;
    dev->pipelines = p;
    dev->tel.pipeline_compiles++;
    dev->compiles_total++;
    dev->tel.pipeline_compile_ms += hl_now_ms() - t0;
    if (dev->caps.has_pipeline_stats) capture_stats(dev, p);
    p->stats.code_digest = code_digest(code, spec, n_spec, required_subgroup);
    p->stats.pipeline = p;
    hl_pipeline_ir_dump(dev, p);
    *out = p;
    return HL_OK;
fail:
    free(p);
    return st;
}

hl_status hl_kernel_machine_code(hl_device *dev, const hl_kernel_stats *ks, void **data, size_t *size, hl_error *err) {
    hl_status st = HL_OK;
    const hl_pipeline *p = NULL;
    VkPipelineCache cache = VK_NULL_HANDLE;
    VkPipeline pipe = VK_NULL_HANDLE;
    void *buf = NULL;
    *data = NULL;
    *size = 0;
    for (const hl_pipeline *it = dev->pipelines; it && !p; it = it->next)
        if (it == ks->pipeline) p = it;
    if (!p) return hl_fail(err, HL_ERR_INVALID_ARGUMENT, "machine code: these statistics are not this device's");
    /* A cache of its own, so its data is this one pipeline's (the device's holds every
     * pipeline compiled on this driver). */
    VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
    HL_VK(vkCreatePipelineCache(dev->device, &ci, NULL, &cache));
    HL_TRY(create(dev, p->shader, p->spec, p->n_spec, p->required_subgroup, cache, 0, &pipe, err));
    size_t n = 0;
    HL_VK(vkGetPipelineCacheData(dev->device, cache, &n, NULL));
    buf = malloc(n ? n : 1);
    if (!buf) {
        st = hl_fail(err, HL_ERR_OUT_OF_MEMORY, "out of host memory");
        goto fail;
    }
    HL_VK(vkGetPipelineCacheData(dev->device, cache, &n, buf));
    *data = buf;
    *size = n;
    buf = NULL;
fail:
    free(buf);
    if (pipe) vkDestroyPipeline(dev->device, pipe, NULL);
    if (cache) vkDestroyPipelineCache(dev->device, cache, NULL);
    return st;
}

void hl_pipelines_destroy(hl_device *dev) {
    hl_pipeline *p = dev->pipelines;
    while (p) {
        hl_pipeline *next = p->next;
        vkDestroyPipeline(dev->device, p->pipeline, NULL);
        dev->tel.live_pipelines--;
        free(p);
        p = next;
    }
    dev->pipelines = NULL;
}

/* count descriptor sets of the one layout, from a pool grown to fit (count 0: the pool only). */
hl_status hl_descriptor_sets(hl_device *dev, uint32_t count, VkDescriptorSet *out, hl_error *err) {
    hl_status st = HL_OK;
    if (!dev->ds_pool || count > dev->ds_capacity) {
        /* Grow in powers of two; nothing from the old pool is in use (every
         * submission has completed when the next one is recorded). */
        uint32_t cap = dev->ds_capacity ? dev->ds_capacity : 8;
        while (cap < count) cap *= 2;
        if (dev->ds_pool) vkDestroyDescriptorPool(dev->device, dev->ds_pool, NULL);
        dev->ds_pool = VK_NULL_HANDLE;
        dev->ds_capacity = 0;
        VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                   .descriptorCount = HL_SET_DESCRIPTORS * cap};
        VkDescriptorPoolCreateInfo dpci = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                           .maxSets = cap,
                                           .poolSizeCount = 1,
                                           .pPoolSizes = &ps};
        HL_VK_FAULT(HL_FAULT_OPEN, vkCreateDescriptorPool(dev->device, &dpci, NULL, &dev->ds_pool));
        dev->ds_capacity = cap;
    } else {
        HL_VK(vkResetDescriptorPool(dev->device, dev->ds_pool, 0));
    }
    for (uint32_t i = 0; i < count; i++) {
        VkDescriptorSetAllocateInfo dsai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                            .descriptorPool = dev->ds_pool,
                                            .descriptorSetCount = 1,
                                            .pSetLayouts = &dev->ds_layout};
        HL_VK(vkAllocateDescriptorSets(dev->device, &dsai, &out[i]));
    }
    return HL_OK;
fail:
    return st;
}

int hl_kernel_spirv(uint32_t i, const char **name, const uint32_t **code, size_t *bytes) {
    if (i >= HL_SHADER_COUNT) return 0;
    *name = hl_spirv_table[i].name;
    *code = hl_spirv_table[i].code;
    *bytes = hl_spirv_table[i].code ? hl_spirv_table[i].size_bytes : 0;
    return 1;
}
