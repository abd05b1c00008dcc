/* caps.c — the device's capability report (hl_caps): properties, limits, the
 * cooperative-matrix tables, and which extensions and features the logical
 * device enables (device.c creates it from this report). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int has_ext(const VkExtensionProperties *e, uint32_t n, const char *name) {
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(e[i].extensionName, name) == 0) return 1;
    return 0;
}

static int map_component(int raw, hl_dtype *out) {
    switch (raw) {
        case VK_COMPONENT_TYPE_FLOAT16_KHR:
            *out = HL_F16;
            return 1;
        case VK_COMPONENT_TYPE_FLOAT32_KHR:
            *out = HL_F32;
            return 1;
        case HL_COMPONENT_BFLOAT16:
            *out = HL_BF16;
            return 1;
        default:
            return 0;
    }
}

/* One extension's properties structure, filled through vkGetPhysicalDeviceProperties2. */
static void ext_properties(VkPhysicalDevice phys, void *ext) {
    VkPhysicalDeviceProperties2 pp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = ext};
    vkGetPhysicalDeviceProperties2(phys, &pp);
}

/* The core properties and limits, the identity (UUIDs, LUID) and the memory heaps;
 * refuses a device older than Vulkan 1.3. */
static hl_status read_properties(hl_device *dev, hl_error *err) {
    hl_caps *c = &dev->caps;
    VkPhysicalDeviceDriverProperties drv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceVulkan13Properties p13 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_PROPERTIES,
                                              .pNext = &drv};
    VkPhysicalDeviceVulkan11Properties p11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES,
                                              .pNext = &p13};
    VkPhysicalDeviceMaintenance3Properties m3 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES,
                                                 .pNext = &p11};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &m3};
    vkGetPhysicalDeviceProperties2(dev->phys, &p2);
    const VkPhysicalDeviceProperties *p = &p2.properties;
    if (VK_API_VERSION_MINOR(p->apiVersion) < 3 && VK_API_VERSION_MAJOR(p->apiVersion) == 1)
        return hl_fail(err, HL_ERR_UNSUPPORTED, "device '%s' offers Vulkan %u.%u; Helios needs 1.3 or newer",
                       p->deviceName, VK_API_VERSION_MAJOR(p->apiVersion), VK_API_VERSION_MINOR(p->apiVersion));
    snprintf(c->name, sizeof c->name, "%s", p->deviceName);
    snprintf(c->driver_name, sizeof c->driver_name, "%s", drv.driverName);
    snprintf(c->driver_info, sizeof c->driver_info, "%s", drv.driverInfo);
    c->vendor_id = p->vendorID;
    c->device_id = p->deviceID;
    c->driver_version = p->driverVersion;
    c->api_version = p->apiVersion;
    c->device_type = (int)p->deviceType;
    c->subgroup_size = p11.subgroupSize;
    c->min_subgroup_size = p13.minSubgroupSize;
    c->max_subgroup_size = p13.maxSubgroupSize;
    c->shared_memory_bytes = p->limits.maxComputeSharedMemorySize;
    c->max_workgroup_invocations = p->limits.maxComputeWorkGroupInvocations;
    for (int i = 0; i < 3; i++) c->max_group_count[i] = p->limits.maxComputeWorkGroupCount[i];
    c->max_storage_buffer_range = p->limits.maxStorageBufferRange;
    c->storage_offset_alignment = p->limits.minStorageBufferOffsetAlignment;
    c->max_allocation_bytes = m3.maxMemoryAllocationSize;
    c->timestamp_period_ns = p->limits.timestampPeriod;
    /* Identity: what ties this Vulkan device to its CUDA and NVML twins. */
    memcpy(c->uuid, p11.deviceUUID, sizeof c->uuid);
    memcpy(c->driver_uuid, p11.driverUUID, sizeof c->driver_uuid);
    memcpy(c->luid, p11.deviceLUID, sizeof c->luid);
    c->luid_valid = p11.deviceLUIDValid == VK_TRUE;

    vkGetPhysicalDeviceMemoryProperties(dev->phys, &dev->mem_props);
    for (uint32_t i = 0; i < dev->mem_props.memoryHeapCount; i++)
        if (dev->mem_props.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT &&
            dev->mem_props.memoryHeaps[i].size > c->device_local_heap_bytes)
            c->device_local_heap_bytes = dev->mem_props.memoryHeaps[i].size;
    return HL_OK;
}

/* The device's cooperative-matrix table (VK_KHR_cooperative_matrix), every row kept:
 * those with types the kernels do not use (int8, fp8...) are still reported. */
static hl_status read_coop_table(hl_device *dev, hl_error *err) {
    hl_status st = HL_OK;
    hl_caps *c = &dev->caps;
    VkCooperativeMatrixPropertiesKHR *props = NULL;
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR get_props =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR)vkGetInstanceProcAddr(
            dev->instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR");
    uint32_t n = 0;
    if (get_props) {
        HL_VK(get_props(dev->phys, &n, NULL));
        props = calloc(n ? n : 1, sizeof *props);
        if (!props) {
            st = hl_fail(err, HL_ERR_OUT_OF_MEMORY, "out of host memory");
            goto fail;
        }
        for (uint32_t i = 0; i < n; i++) props[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_KHR;
        HL_VK(get_props(dev->phys, &n, props));
    }
    for (uint32_t i = 0; i < n && c->n_coop_shapes < HL_MAX_COOP_SHAPES; i++) {
        hl_coop_shape *s = &c->coop_shapes[c->n_coop_shapes];
        memset(s, 0, sizeof *s);
        s->m = props[i].MSize;
        s->n = props[i].NSize;
        s->k = props[i].KSize;
        s->a_raw = props[i].AType;
        s->b_raw = props[i].BType;
        s->c_raw = props[i].CType;
        s->result_raw = props[i].ResultType;
        s->saturating = props[i].saturatingAccumulation;
        s->scope = props[i].scope;
        /* Rows with types we do not use (int8, fp8...) are still reported. */
        if (!map_component(s->a_raw, &s->a)) s->a = (hl_dtype)-1;
        if (!map_component(s->b_raw, &s->b)) s->b = (hl_dtype)-1;
        if (!map_component(s->c_raw, &s->c)) s->c = (hl_dtype)-1;
        if (!map_component(s->result_raw, &s->result)) s->result = (hl_dtype)-1;
        c->n_coop_shapes++;
    }
fail:
    free(props);
    return st;
}

#ifdef VK_NV_cooperative_matrix2
/* NV cooperative matrix 2: its flexible-dimension rows with fp16 inputs and the
 * workgroup-scope size limit. */
static hl_status read_coop2_table(hl_device *dev, hl_error *err) {
    hl_status st = HL_OK;
    hl_caps *c = &dev->caps;
    PFN_vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV get_flex =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV)vkGetInstanceProcAddr(
            dev->instance, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV");
    uint32_t n = 0;
    if (get_flex && get_flex(dev->phys, &n, NULL) == VK_SUCCESS) c->n_coop2_flex = n;
    if (get_flex && n) {
        VkCooperativeMatrixFlexibleDimensionsPropertiesNV *rows = calloc(n, sizeof *rows);
        if (!rows) {
            st = hl_fail(err, HL_ERR_OUT_OF_MEMORY, "out of host memory");
            goto fail;
        }
        for (uint32_t i = 0; i < n; i++)
            rows[i].sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_FLEXIBLE_DIMENSIONS_PROPERTIES_NV;
        if (get_flex(dev->phys, &n, rows) == VK_SUCCESS) {
            for (uint32_t i = 0; i < n && c->n_coop2_flex_f16 < HL_MAX_COOP_SHAPES; i++) {
                hl_dtype a, b, cc, r;
                if (!map_component(rows[i].AType, &a) || !map_component(rows[i].BType, &b) ||
                    !map_component(rows[i].CType, &cc) || !map_component(rows[i].ResultType, &r) || a != HL_F16 ||
                    b != HL_F16)
                    continue;
                struct hl_coop2_flex *f = &c->coop2_flex[c->n_coop2_flex_f16++];
                f->m_gran = rows[i].MGranularity;
                f->n_gran = rows[i].NGranularity;
                f->k_gran = rows[i].KGranularity;
                f->invocations = rows[i].workgroupInvocations;
                f->c = cc;
                f->result = r;
                f->scope = rows[i].scope;
            }
        }
        free(rows);
    }
    VkPhysicalDeviceCooperativeMatrix2PropertiesNV p2nv = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_PROPERTIES_NV};
    ext_properties(dev->phys, &p2nv);
    c->coop2_workgroup_scope_max_invocations = p2nv.cooperativeMatrixWorkgroupScopeMaxWorkgroupSize;
    return HL_OK;
fail:
    return st;
}
#endif

/* A timeline semaphore the device can export as an opaque fd (ordering with CUDA). */
static int timeline_exportable(const hl_device *dev) {
    VkSemaphoreTypeCreateInfo tl = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                    .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
    VkPhysicalDeviceExternalSemaphoreInfo si = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_SEMAPHORE_INFO,
                                                .pNext = &tl,
                                                .handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT};
    VkExternalSemaphoreProperties sp = {.sType = VK_STRUCTURE_TYPE_EXTERNAL_SEMAPHORE_PROPERTIES};
    vkGetPhysicalDeviceExternalSemaphoreProperties(dev->phys, &si, &sp);
    return (sp.externalSemaphoreFeatures & VK_EXTERNAL_SEMAPHORE_FEATURE_EXPORTABLE_BIT) != 0;
}

/* The SM count (VK_NV_shader_sm_builtins) and the PCI address, where the device reports them. */
static void read_identity(hl_device *dev, const VkExtensionProperties *exts, uint32_t n_ext) {
    hl_caps *c = &dev->caps;
#ifdef VK_NV_shader_sm_builtins
    if (has_ext(exts, n_ext, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME)) {
        VkPhysicalDeviceShaderSMBuiltinsPropertiesNV sm = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
        ext_properties(dev->phys, &sm);
        c->sm_count = sm.shaderSMCount;
    }
#endif
    if (has_ext(exts, n_ext, VK_EXT_PCI_BUS_INFO_EXTENSION_NAME)) {
        VkPhysicalDevicePCIBusInfoPropertiesEXT pci = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PCI_BUS_INFO_PROPERTIES_EXT};
        ext_properties(dev->phys, &pci);
        c->has_pci = 1;
        c->pci_domain = pci.pciDomain;
        c->pci_bus = pci.pciBus;
        c->pci_device = pci.pciDevice;
        c->pci_function = pci.pciFunction;
    }
}

/* The device's extensions (*exts: malloc'd, the caller frees it). */
static hl_status read_extensions(hl_device *dev, VkExtensionProperties **exts, uint32_t *n_ext, hl_error *err) {
    hl_status st = HL_OK;
    HL_VK(vkEnumerateDeviceExtensionProperties(dev->phys, NULL, n_ext, NULL));
    *exts = calloc(*n_ext ? *n_ext : 1, sizeof **exts);
    if (!*exts) return hl_fail(err, HL_ERR_OUT_OF_MEMORY, "out of host memory");
    HL_VK(vkEnumerateDeviceExtensionProperties(dev->phys, NULL, n_ext, *exts));
fail:
    return st;
}

/* A bf16 x bf16 -> f32 row at subgroup scope in the coop table. */
static int has_bf16_row(const hl_caps *c) {
    int row = 0;
    for (uint32_t i = 0; i < c->n_coop_shapes; i++)
        row |= c->coop_shapes[i].a == HL_BF16 && c->coop_shapes[i].b == HL_BF16 && c->coop_shapes[i].c == HL_F32 &&
               c->coop_shapes[i].scope == VK_SCOPE_SUBGROUP_KHR;
    return row;
}

#ifdef VK_NV_cooperative_matrix2
/* NV cooperative matrix 2's features, and whether the coop2 GEMM path can use them. */
static void coop2_features(hl_caps *c, const VkPhysicalDeviceCooperativeMatrix2FeaturesNV *f) {
    c->coop2_workgroup_scope = f->cooperativeMatrixWorkgroupScope;
    c->coop2_flexible_dimensions = f->cooperativeMatrixFlexibleDimensions;
    c->coop2_tensor_addressing = f->cooperativeMatrixTensorAddressing;
    c->coop2_conversions = f->cooperativeMatrixConversions;
    c->coop2_usable = c->coop2_workgroup_scope && c->coop2_flexible_dimensions && c->coop2_tensor_addressing;
}
#endif

/* VK_KHR_shader_clock's device clock (HELIOS_PLAN_TRACE's stamps), where the extension is offered. */
static int device_clock(hl_device *dev) {
    VkPhysicalDeviceShaderClockFeaturesKHR f = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CLOCK_FEATURES_KHR};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f};
    vkGetPhysicalDeviceFeatures2(dev->phys, &f2);
    return f.shaderDeviceClock == VK_TRUE;
}

hl_status hl_query_caps(hl_device *dev, hl_error *err) {
    hl_status st = HL_OK;
    hl_caps *c = &dev->caps;
    VkExtensionProperties *exts = NULL;
    HL_TRY(read_properties(dev, err));
    uint32_t n_ext = 0;
    HL_TRY(read_extensions(dev, &exts, &n_ext, err));
    int ext_coop = has_ext(exts, n_ext, VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME);
    c->has_coop2 = has_ext(exts, n_ext, "VK_NV_cooperative_matrix2");
    c->has_bf16 = has_ext(exts, n_ext, "VK_KHR_shader_bfloat16");
    c->external_memory_fd = has_ext(exts, n_ext, VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME);
    int ext_sem_fd = has_ext(exts, n_ext, VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME);
    int ext_stats = has_ext(exts, n_ext, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
    c->global_priority_ext = has_ext(exts, n_ext, VK_KHR_GLOBAL_PRIORITY_EXTENSION_NAME)   ? 1
                             : has_ext(exts, n_ext, VK_EXT_GLOBAL_PRIORITY_EXTENSION_NAME) ? 2
                                                                                           : 0;
    read_identity(dev, exts, n_ext);

#ifdef VK_NV_cooperative_matrix2
    VkPhysicalDeviceCooperativeMatrix2FeaturesNV fcoop2 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV};
    void *coop2_chain = c->has_coop2 ? (void *)&fcoop2 : NULL;
#else
    void *coop2_chain = NULL;
#endif
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR fstats = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR, .pNext = coop2_chain};
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR fcoop = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR,
        .pNext = ext_stats ? (void *)&fstats : coop2_chain};
    /* Chain only the structures of extensions the device offers. */
    void *ext_chain = ext_coop ? (void *)&fcoop : ext_stats ? (void *)&fstats : coop2_chain;
    hl_bf16_features fbf16 = {.sType = HL_STYPE_BF16_FEATURES, .pNext = ext_chain};
    if (c->has_bf16) ext_chain = &fbf16;
    VkPhysicalDeviceVulkan13Features f13 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
                                            .pNext = ext_chain};
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                            .pNext = &f13};
    VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                            .pNext = &f12};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11};
    vkGetPhysicalDeviceFeatures2(dev->phys, &f2);
    if (!f11.storageBuffer16BitAccess) {
        st = hl_fail(err, HL_ERR_UNSUPPORTED,
                     "device '%s' lacks storageBuffer16BitAccess, "
                     "needed for fp16 buffers",
                     c->name);
        goto fail;
    }
    c->has_fp16 = f12.shaderFloat16;
    c->has_int16 = f2.features.shaderInt16 == VK_TRUE;
    c->has_buffer_arrays = f2.features.shaderStorageBufferArrayDynamicIndexing == VK_TRUE;
    c->has_timeline = f12.timelineSemaphore == VK_TRUE;
    /* Ordering with CUDA without host waits: a timeline semaphore both can signal and wait on. */
    c->external_semaphore_fd = c->external_memory_fd && ext_sem_fd && f12.timelineSemaphore;
    if (c->external_semaphore_fd) c->external_semaphore_fd = timeline_exportable(dev);
    c->has_subgroup_size_control = f13.subgroupSizeControl && f13.computeFullSubgroups;
    c->has_pipeline_stats = ext_stats && fstats.pipelineExecutableInfo;
    c->has_device_clock = has_ext(exts, n_ext, VK_KHR_SHADER_CLOCK_EXTENSION_NAME) && device_clock(dev);
#ifdef VK_NV_cooperative_matrix2
    if (c->has_coop2) coop2_features(c, &fcoop2);
#endif
    c->has_coop = ext_coop && fcoop.cooperativeMatrix && f12.shaderFloat16 && f12.vulkanMemoryModel &&
                  c->has_subgroup_size_control;
    /* (and a bf16 row in the table: checked once it is read, below) */
    c->bf16_coop =
        c->has_coop && c->has_bf16 && c->has_int16 && fbf16.shaderBFloat16Type && fbf16.shaderBFloat16CooperativeMatrix;

    if (ext_coop) HL_TRY(read_coop_table(dev, err));
    c->bf16_coop = c->bf16_coop && has_bf16_row(c);
#ifdef VK_NV_cooperative_matrix2
    if (c->has_coop2) HL_TRY(read_coop2_table(dev, err));
#endif
    free(exts);
    return HL_OK;
fail:
    free(exts);
    return st;
}

/* Why bf16 products do not run on cooperative matrices here (NULL where they do). */
const char *hl_bf16_coop_unavailable(const hl_device *dev) {
    const hl_caps *c = &dev->caps;
    if (dev->bf16_coop_enabled) return NULL;
    if (!c->has_coop) return "the device has no usable cooperative matrices";
    if (!dev->coop_enabled) return "cooperative matrices are disabled (HELIOS_DISABLE_COOP=1 or disable_coop=True)";
    if (!c->has_bf16) return "the device does not offer VK_KHR_shader_bfloat16";
    if (!c->bf16_coop)
        return "the device offers no bf16 x bf16 -> f32 subgroup cooperative matrix (or lacks shaderInt16)";
    if (!HL_BUILT_GL_EXT_BFLOAT16) return "this build's glslc lacked GL_EXT_bfloat16 (rebuild with a newer glslc)";
    return "they are disabled (HELIOS_DISABLE_BF16_COOP=1)";
}
