/* device.c — instance, device selection, logical device (the capability report: caps.c). */
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helios_capture.h"
#include "internal.h"

static hl_status create_instance(VkInstance *out, hl_error *err) {
    hl_status st = HL_OK;
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "helios", .apiVersion = VK_API_VERSION_1_3};
    VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    VkResult vr = vkCreateInstance(&ci, NULL, out);
    if (vr == VK_ERROR_INCOMPATIBLE_DRIVER || vr == VK_ERROR_INITIALIZATION_FAILED)
        return hl_fail(err, HL_ERR_NO_DEVICE,
                       "no Vulkan driver found (vkCreateInstance: %s); install a Vulkan ICD "
                       "(NVIDIA driver, or Mesa's lavapipe) and the loader libvulkan1",
                       hl_vk_result_name(vr));
    HL_VK(vr);
    return HL_OK;
fail:
    return st;
}

static hl_status list_physical(VkInstance inst, VkPhysicalDevice **out, uint32_t *n, hl_error *err) {
    hl_status st = HL_OK;
    *out = NULL;
    HL_VK(vkEnumeratePhysicalDevices(inst, n, NULL));
    if (*n == 0) return hl_fail(err, HL_ERR_NO_DEVICE, "Vulkan reports no physical devices");
    *out = calloc(*n, sizeof **out);
    if (!*out) return hl_fail(err, HL_ERR_OUT_OF_MEMORY, "out of host memory listing devices");
    HL_VK(vkEnumeratePhysicalDevices(inst, n, *out));
    return HL_OK;
fail:
    free(*out);
    *out = NULL;
    return st;
}

hl_status hl_device_count(uint32_t *count, hl_error *err) {
    VkInstance inst = VK_NULL_HANDLE;
    VkPhysicalDevice *phys = NULL;
    *count = 0;
    /* No loader, no driver, no device: 0, as torch.cuda.device_count() says; opening a
     * Device is what raises NoDeviceError naming the package to install. */
    hl_status st = hl_vk_load(err);
    if (st == HL_ERR_NO_DEVICE) return HL_OK;
    if (st != HL_OK) return st;
    st = create_instance(&inst, err);
    if (st == HL_OK) st = list_physical(inst, &phys, count, err);
    free(phys);
    if (inst) vkDestroyInstance(inst, NULL);
    if (st == HL_ERR_NO_DEVICE) {
        *count = 0;
        return HL_OK;
    }
    return st;
}

static int rank_type(VkPhysicalDeviceType t) {
    switch (t) {
        case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
            return 4;
        case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
            return 3;
        case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
            return 2;
        case VK_PHYSICAL_DEVICE_TYPE_CPU:
            return 1;
        default:
            return 0;
    }
}

static hl_status pick_queue(hl_device *dev, hl_error *err) {
    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(dev->phys, &n, NULL);
    VkQueueFamilyProperties q[32];
    if (n > 32) n = 32;
    vkGetPhysicalDeviceQueueFamilyProperties(dev->phys, &n, q);
    int best = -1, asked = -1;
    /* The queue the environment asks for: its family and its priority. */
    hl_status st = hl_env_index("HELIOS_QUEUE_FAMILY", &asked, err);
    if (st == HL_OK) st = hl_env_queue_priority(&dev->caps.queue_priority_asked, err);
    if (st != HL_OK) return st;
    if (asked >= 0) { /* a measuring switch: which engine a family reaches is the driver's business */
        if ((uint32_t)asked >= n || !(q[asked].queueFlags & VK_QUEUE_COMPUTE_BIT))
            return hl_fail(
                err, HL_ERR_INVALID_ARGUMENT, "HELIOS_QUEUE_FAMILY=%d: device '%s' %s", asked, dev->caps.name,
                (uint32_t)asked >= n ? "has no queue family of that index" : "has no compute on that family");
        best = asked;
    }
    for (uint32_t i = 0; i < n && asked < 0; i++) {
        if (!(q[i].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
        /* Prefer a family with timestamps; among those, a compute-only one. */
        int score = (q[i].timestampValidBits ? 2 : 0) + !(q[i].queueFlags & VK_QUEUE_GRAPHICS_BIT);
        if (best < 0 || score > ((q[best].timestampValidBits ? 2 : 0) + !(q[best].queueFlags & VK_QUEUE_GRAPHICS_BIT)))
            best = (int)i;
    }
    if (best < 0) return hl_fail(err, HL_ERR_UNSUPPORTED, "device '%s' has no compute queue", dev->caps.name);
    dev->queue_family = (uint32_t)best;
    dev->caps.queue_family = (uint32_t)best;
    dev->caps.queue_family_graphics = (q[best].queueFlags & VK_QUEUE_GRAPHICS_BIT) != 0;
    dev->caps.timestamp_valid_bits = q[best].timestampValidBits;
    dev->timestamps_ok = q[best].timestampValidBits > 0 && dev->caps.timestamp_period_ns > 0;
    return HL_OK;
}

/* A plan's persistent runs of products (plan_persist.c): PERSIST_PER_SM workgroups an SM, where the
 * device reports its SMs, indexes arrays of buffers and has 16-bit integers; HELIOS_PLAN_PERSISTENT_GRID sets the
 * grid on any device (lavapipe runs a workgroup a thread); HELIOS_DISABLE_PLAN_PERSISTENT=1
 * turns them off. Two an SM: three were not resident on an H200 (results/h200-persist).
 * Decode attentions size their splits for that grid whether runs are on or off
 * (split_width, decode.c), so that an attention in a run and apart are the same. */
#define PERSIST_PER_SM 2u

/* The most workgroups the device holds resident at once, as far as it can be known (0:
 * not known). A GPU reporting its SMs: PERSIST_PER_SM an SM. A CPU device (lavapipe)
 * runs a workgroup on a thread: LP_NUM_THREADS where set, else the CPU's cores. */
static uint32_t resident_workgroups(const hl_device *dev) {
    if (dev->caps.device_type == VK_PHYSICAL_DEVICE_TYPE_CPU) {
        const char *lp = getenv("LP_NUM_THREADS");
        long n = lp && *lp ? strtol(lp, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
        return n > 0 ? (uint32_t)n : 1u;
    }
    return PERSIST_PER_SM * dev->caps.sm_count;
}

static hl_status persist_switches(hl_device *dev, hl_error *err) {
    hl_status st = HL_OK;
    int off = 0, grid = -1, unbounded = 0, trace = 0, glu_apart = 0;
    HL_TRY(hl_env_flag("HELIOS_DISABLE_PLAN_PERSISTENT", &off, err));
    HL_TRY(hl_env_flag("HELIOS_PLAN_TRACE", &trace, err));
    if (trace && !dev->caps.has_device_clock)
        return hl_fail(err, HL_ERR_UNSUPPORTED,
                       "HELIOS_PLAN_TRACE=1: '%s' lacks VK_KHR_shader_clock's shaderDeviceClock, the clock a "
                       "persistent run's stamps read",
                       dev->caps.name);
    dev->plan_policy.trace = trace;
    HL_TRY(hl_env_flag("HELIOS_DISABLE_PLAN_SWIGLU_IN_RUN", &glu_apart, err));
    dev->plan_policy.swiglu_in_run = !glu_apart;
    HL_TRY(hl_env_index("HELIOS_PLAN_PERSISTENT_GRID", &grid, err));
    HL_TRY(hl_env_flag("HELIOS_TEST_UNBOUNDED_GRID", &unbounded, err));
    const uint32_t resident = resident_workgroups(dev);
    if (grid > 0 && resident && (uint32_t)grid > resident && !unbounded)
        return hl_fail(err, HL_ERR_INVALID_ARGUMENT,
                       "HELIOS_PLAN_PERSISTENT_GRID=%d: '%s' holds at most %u workgroups at once (%s); a larger "
                       "grid's barrier would wait on workgroups that cannot run",
                       grid, dev->caps.name, resident,
                       dev->caps.device_type == VK_PHYSICAL_DEVICE_TYPE_CPU
                           ? "a CPU device runs one a thread: LP_NUM_THREADS, else the cores"
                           : "two an SM");
    dev->plan_policy.persist_grid = dev->plan_policy.split_width =
        grid >= 0 ? grid : (int)(PERSIST_PER_SM * dev->caps.sm_count);
    if (off || !dev->caps.has_buffer_arrays || !dev->caps.has_int16 || !dev->gemv_enabled)
        dev->plan_policy.persist_grid = 0;
fail:
    return st;
}

/* Long: the features a device is created with, one struct each chained through pNext (locals of
 * this scope) and enabled where the capability report found them. */
static hl_status create_logical(hl_device *dev, hl_error *err) {
    hl_status st = HL_OK;
    const hl_caps *c = &dev->caps;
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = dev->queue_family,
                                   .queueCount = 1,
                                   .pQueuePriorities = &prio};
#ifdef VK_NV_cooperative_matrix2
    /* the coop2 GEMM path's three features where it is usable, the conversions (the
     * attention forward's P in registers) wherever the device has them */
    VkPhysicalDeviceCooperativeMatrix2FeaturesNV fcoop2 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_2_FEATURES_NV,
        .cooperativeMatrixWorkgroupScope = (VkBool32)c->coop2_usable,
        .cooperativeMatrixFlexibleDimensions = (VkBool32)c->coop2_usable,
        .cooperativeMatrixTensorAddressing = (VkBool32)c->coop2_usable,
        .cooperativeMatrixConversions = (VkBool32)c->coop2_conversions};
    void *coop2_chain = c->has_coop && (c->coop2_usable || c->coop2_conversions) ? (void *)&fcoop2 : NULL;
#else
    void *coop2_chain = NULL;
#endif
    VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR fstats = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
        .pNext = coop2_chain,
        .pipelineExecutableInfo = VK_TRUE};
    VkPhysicalDeviceCooperativeMatrixFeaturesKHR fcoop = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_KHR,
        .pNext = c->has_pipeline_stats ? (void *)&fstats : coop2_chain,
        .cooperativeMatrix = VK_TRUE};
    VkPhysicalDeviceVulkan13Features f13 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
                                            .pNext = c->has_coop             ? (void *)&fcoop
                                                     : c->has_pipeline_stats ? (void *)&fstats
                                                                             : NULL,
                                            .subgroupSizeControl = (VkBool32)c->has_subgroup_size_control,
                                            .computeFullSubgroups = (VkBool32)c->has_subgroup_size_control};
    VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                            .pNext = &f13,
                                            .shaderFloat16 = (VkBool32)c->has_fp16,
                                            .vulkanMemoryModel = (VkBool32)c->has_coop,
                                            .vulkanMemoryModelDeviceScope = VK_FALSE,
                                            .timelineSemaphore = (VkBool32)c->has_timeline};
    VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                            .pNext = &f12,
                                            .storageBuffer16BitAccess = VK_TRUE};
    hl_bf16_features fbf16 = {.sType = HL_STYPE_BF16_FEATURES,
                              .pNext = &f11,
                              .shaderBFloat16Type = VK_TRUE,
                              .shaderBFloat16CooperativeMatrix = VK_TRUE};
    VkPhysicalDeviceShaderClockFeaturesKHR fclock = {.sType =
                                                         VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_CLOCK_FEATURES_KHR,
                                                     .pNext = c->bf16_coop ? (void *)&fbf16 : (void *)&f11,
                                                     .shaderDeviceClock = VK_TRUE};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                    .pNext = c->has_device_clock ? (void *)&fclock : fclock.pNext};
    f2.features.shaderInt16 = (VkBool32)c->has_int16;
    f2.features.shaderStorageBufferArrayDynamicIndexing = (VkBool32)c->has_buffer_arrays;
    const char *exts[8]; /* (the last for the queue priority) */
    uint32_t n_ext = 0;
    if (c->external_memory_fd) exts[n_ext++] = VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME; /* CUDA interop */
    if (c->external_semaphore_fd) exts[n_ext++] = VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME;
    if (c->has_coop) exts[n_ext++] = VK_KHR_COOPERATIVE_MATRIX_EXTENSION_NAME;
    if (c->has_coop && (c->coop2_usable || c->coop2_conversions)) exts[n_ext++] = "VK_NV_cooperative_matrix2";
    if (c->has_pipeline_stats) exts[n_ext++] = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
    if (c->bf16_coop) exts[n_ext++] = "VK_KHR_shader_bfloat16";
    if (c->has_device_clock) exts[n_ext++] = VK_KHR_SHADER_CLOCK_EXTENSION_NAME; /* HELIOS_PLAN_TRACE's stamps */
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .pNext = &f2,
                              .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci,
                              .enabledExtensionCount = n_ext,
                              .ppEnabledExtensionNames = exts};
    /* A queue priority above the default is a privilege on some drivers: refused
     * (VK_ERROR_NOT_PERMITTED), the device opens at the default and says so. */
    VkDeviceQueueGlobalPriorityCreateInfoKHR qprio = {
        .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_GLOBAL_PRIORITY_CREATE_INFO_KHR,
        .globalPriority = (VkQueueGlobalPriorityKHR)c->queue_priority_asked};
    if (c->queue_priority_asked && c->global_priority_ext) {
        qci.pNext = &qprio;
        exts[n_ext] =
            c->global_priority_ext == 1 ? VK_KHR_GLOBAL_PRIORITY_EXTENSION_NAME : VK_EXT_GLOBAL_PRIORITY_EXTENSION_NAME;
        dci.enabledExtensionCount = n_ext + 1;
        VkResult vr = hl_fault(HL_FAULT_OPEN);
        if (vr == VK_SUCCESS) vr = vkCreateDevice(dev->phys, &dci, NULL, &dev->device);
        if (vr == VK_SUCCESS)
            dev->caps.queue_priority = c->queue_priority_asked;
        else if (vr == VK_ERROR_NOT_PERMITTED_KHR)
            dev->caps.queue_priority_refused = 1;
        else {
            st = hl_vk_fail(err, vr, "vkCreateDevice (with a queue priority)", __FILE__, __LINE__);
            goto fail;
        }
        qci.pNext = NULL;
        dci.enabledExtensionCount = n_ext;
    }
    if (!dev->device) HL_VK_FAULT(HL_FAULT_OPEN, vkCreateDevice(dev->phys, &dci, NULL, &dev->device));
    vkGetDeviceQueue(dev->device, dev->queue_family, 0, &dev->queue);
    return HL_OK;
fail:
    return st; /* partial objects are released by hl_device_destroy */
}

/* The extension entry points the device was created with; a capability whose entry
 * point is missing is turned off (its users then say it is unavailable). */
static void load_device_functions(hl_device *dev) {
    const hl_caps *c = &dev->caps;
    if (c->external_memory_fd) {
        dev->get_memory_fd = (PFN_vkGetMemoryFdKHR)vkGetDeviceProcAddr(dev->device, "vkGetMemoryFdKHR");
        if (!dev->get_memory_fd) dev->caps.external_memory_fd = 0;
    }
    if (c->has_timeline) {
        dev->wait_semaphores = (PFN_vkWaitSemaphores)vkGetDeviceProcAddr(dev->device, "vkWaitSemaphores");
        dev->signal_semaphore = (PFN_vkSignalSemaphore)vkGetDeviceProcAddr(dev->device, "vkSignalSemaphore");
        dev->semaphore_value =
            (PFN_vkGetSemaphoreCounterValue)vkGetDeviceProcAddr(dev->device, "vkGetSemaphoreCounterValue");
        if (!dev->wait_semaphores || !dev->signal_semaphore || !dev->semaphore_value) dev->caps.has_timeline = 0;
    }
    if (c->external_semaphore_fd) {
        dev->get_semaphore_fd = (PFN_vkGetSemaphoreFdKHR)vkGetDeviceProcAddr(dev->device, "vkGetSemaphoreFdKHR");
        if (!dev->get_semaphore_fd || !dev->caps.has_timeline) dev->caps.external_semaphore_fd = 0;
    }
}

/* The command pool, the command buffer synchronous calls record into, its fence;
 * the one descriptor-set and pipeline layout every kernel uses, and the first pool. */
static hl_status create_command_objects(hl_device *dev, hl_error *err) {
    hl_status st = HL_OK;
    VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                   .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                   .queueFamilyIndex = dev->queue_family};
    HL_VK_FAULT(HL_FAULT_OPEN, vkCreateCommandPool(dev->device, &pci, NULL, &dev->cmd_pool));
    VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                       .commandPool = dev->cmd_pool,
                                       .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                       .commandBufferCount = 1};
    HL_VK_FAULT(HL_FAULT_OPEN, vkAllocateCommandBuffers(dev->device, &cai, &dev->cmd));
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    HL_VK_FAULT(HL_FAULT_OPEN, vkCreateFence(dev->device, &fci, NULL, &dev->fence));

    /* One layout for every kernel: in set 0, A, B, C, the split-K workspace and the bias
     * as storage buffers (each kind its slots); in set HL_PERSIST_SET, a persistent run's
     * members' buffers as one array, which only a run's dispatch binds (so that no other
     * set holds it); shapes, layouts and the epilogue's scalars as push constants. */
    VkDescriptorSetLayoutBinding binds[HL_BINDINGS];
    for (uint32_t i = 0; i < HL_BINDINGS; i++)
        binds[i] = (VkDescriptorSetLayoutBinding){.binding = i,
                                                  .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                  .descriptorCount = 1,
                                                  .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo dslci = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, .bindingCount = HL_BINDINGS, .pBindings = binds};
    HL_VK_FAULT(HL_FAULT_OPEN, vkCreateDescriptorSetLayout(dev->device, &dslci, NULL, &dev->ds_layout));
    const VkDescriptorSetLayoutBinding members = {.binding = HL_BIND_PERSIST,
                                                  .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                                  .descriptorCount = HL_PERSIST_SLOTS,
                                                  .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    dslci.bindingCount = 1;
    dslci.pBindings = &members;
    HL_VK_FAULT(HL_FAULT_OPEN, vkCreateDescriptorSetLayout(dev->device, &dslci, NULL, &dev->ds_layout_persist));
    _Static_assert(HL_PERSIST_SET == 1, "a run's set follows set 0");
    const VkDescriptorSetLayout sets[2] = {dev->ds_layout, dev->ds_layout_persist};
    VkPushConstantRange pcr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = HL_PUSH_BYTES};
    VkPipelineLayoutCreateInfo plci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                       .setLayoutCount = 2,
                                       .pSetLayouts = sets,
                                       .pushConstantRangeCount = 1,
                                       .pPushConstantRanges = &pcr};
    HL_VK_FAULT(HL_FAULT_OPEN, vkCreatePipelineLayout(dev->device, &plci, NULL, &dev->pipe_layout));
    HL_TRY(hl_descriptor_sets(dev, 0, NULL, err)); /* the pool, for the first calls */
    return HL_OK;
fail:
    return st; /* partial objects are released by hl_device_destroy */
}

/* The plan's kill switches: each environment variable set to 1 turns its field off
 * (python/helios/switches.py documents them). */
static const struct {
    const char *env;
    size_t on; /* offsetof the hl_device field it clears */
} KILL_SWITCHES[] = {
    {"HELIOS_DISABLE_DECODE_ATTENTION_FUSION", offsetof(hl_device, plan_policy.decode_attention_fused)},
    {"HELIOS_DISABLE_PLAN_NORM_FUSION", offsetof(hl_device, plan_policy.norm_fused)},
    {"HELIOS_DISABLE_PLAN_SWIGLU_FUSION", offsetof(hl_device, plan_policy.swiglu_fused)},
    {"HELIOS_DISABLE_PLAN_ROPE_FUSION", offsetof(hl_device, plan_policy.rope_fused)},
    {"HELIOS_DISABLE_DECODE_ATTENTION_GRID", offsetof(hl_device, plan_policy.decode_grid_sized)},
};

hl_status hl_device_create(const hl_device_options *opt, hl_device **out, hl_error *err) {
    hl_status st = HL_OK;
    VkPhysicalDevice *phys = NULL;
    *out = NULL;
    hl_status lst = hl_vk_load(err);
    if (lst != HL_OK) return lst;
    hl_device *dev = calloc(1, sizeof *dev);
    if (!dev) return hl_fail(err, HL_ERR_OUT_OF_MEMORY, "out of host memory");
    dev->group.hazards = hl_hazard_set_over(dev->group.hazard_ranges[0], dev->group.hazard_ranges[1], HL_HAZARD_RANGES);
    HL_TRY(create_instance(&dev->instance, err));
    uint32_t n = 0;
    HL_TRY(list_physical(dev->instance, &phys, &n, err));

    int index = -1, disable = 0, disable2 = 0;
    if (opt && opt->index >= 0)
        index = opt->index;
    else
        HL_TRY(hl_env_index("HELIOS_DEVICE", &index, err));
    HL_TRY(hl_env_flag("HELIOS_DISABLE_COOP", &disable, err));
    HL_TRY(hl_env_flag("HELIOS_DISABLE_COOP2", &disable2, err));
    if (index >= (int)n || index < -1) {
        st = hl_fail(err, HL_ERR_DEVICE_INDEX, "device index %d out of range: %u Vulkan device%s", index, n,
                     n == 1 ? "" : "s");
        goto fail;
    }
    if (index < 0) { /* best type wins; first listed breaks ties */
        int best_rank = -1;
        for (uint32_t i = 0; i < n; i++) {
            VkPhysicalDeviceProperties p;
            vkGetPhysicalDeviceProperties(phys[i], &p);
            if (rank_type(p.deviceType) > best_rank) {
                best_rank = rank_type(p.deviceType);
                index = (int)i;
            }
        }
    }
    dev->phys = phys[index];
    HL_TRY(hl_query_caps(dev, err));
    HL_TRY(pick_queue(dev, err));
    /* A GPU's waits poll (a decode step is done tens of microseconds before a sleeping
     * thread wakes); on a CPU device the poll would take a core from the device itself. */
    const uint32_t spin_us = dev->caps.device_type == VK_PHYSICAL_DEVICE_TYPE_CPU ? 0u : HL_WAIT_SPIN_US;
    HL_TRY(hl_env_uint("HELIOS_WAIT_SPIN_US", 1000000u, spin_us, &dev->wait_spin_us, err));
    HL_TRY(create_logical(dev, err));
    load_device_functions(dev);
    HL_TRY(create_command_objects(dev, err));
    HL_TRY(hl_pipeline_cache_open(dev, err));
    disable = disable || (opt && opt->disable_coop);
    disable2 = disable2 || (opt && opt->disable_coop2);
    dev->coop_enabled = dev->caps.has_coop && !disable;
    dev->coop2_enabled = dev->coop_enabled && dev->caps.coop2_usable && !disable2;
    int disable_bf16 = 0;
    HL_TRY(hl_env_flag("HELIOS_DISABLE_BF16_COOP", &disable_bf16, err));
    dev->bf16_coop_enabled = dev->coop_enabled && dev->caps.bf16_coop && HL_BUILT_GL_EXT_BFLOAT16 && !disable_bf16;
    int disable_gemv = 0;
    HL_TRY(hl_env_flag("HELIOS_DISABLE_GEMV", &disable_gemv, err));
    dev->gemv_enabled = dev->caps.has_subgroup_size_control && !disable_gemv;
    for (size_t i = 0; i < sizeof KILL_SWITCHES / sizeof KILL_SWITCHES[0]; i++) {
        int off = 0;
        HL_TRY(hl_env_flag(KILL_SWITCHES[i].env, &off, err));
        *(int *)((char *)dev + KILL_SWITCHES[i].on) = !off;
    }
    HL_TRY(persist_switches(dev, err));
    hl_rows_layouts_probe(dev);
    free(phys);
    *out = dev;
    return HL_OK;
fail:
    free(phys);
    hl_device_destroy(dev);
    return st;
}

void hl_device_destroy(hl_device *dev) {
    if (!dev) return;
    if (hl_device_abandon(dev)) {
        /* The GPU still runs a submission whose wait was interrupted: freeing what it
         * uses could crash the driver. Its tensors die (their memory goes with the
         * device), the Vulkan objects are left to process exit. */
        hl_tensors_detach(dev);
        hl_plans_detach(dev);
        hl_captures_detach(dev);
        free(dev->graveyard);
        free(dev);
        return;
    }
    if (dev->device) {
        vkDeviceWaitIdle(dev->device); /* best effort: nothing may be in flight */
        hl_plans_release(dev);
        hl_captures_release(dev);
        hl_pipelines_destroy(dev);
        hl_pipeline_cache_close(dev);
        hl_tensors_release(dev);
        if (dev->group.open) { /* a group left open: its recorded work is submitted, so that nothing waits forever */
            hl_error ignored;
            hl_async_group_end(dev, &ignored);
        }
        hl_async_close(dev);
        hl_profile_close(dev);
        hl_cuda_detach(dev);
        hl_device_release_scratch(dev);
        hl_buffer_destroy(dev, &dev->staging);
        if (dev->query_pool) vkDestroyQueryPool(dev->device, dev->query_pool, NULL);
        if (dev->ds_pool) vkDestroyDescriptorPool(dev->device, dev->ds_pool, NULL);
        if (dev->pipe_layout) vkDestroyPipelineLayout(dev->device, dev->pipe_layout, NULL);
        if (dev->ds_layout) vkDestroyDescriptorSetLayout(dev->device, dev->ds_layout, NULL);
        if (dev->ds_layout_persist) vkDestroyDescriptorSetLayout(dev->device, dev->ds_layout_persist, NULL);
        if (dev->fence) vkDestroyFence(dev->device, dev->fence, NULL);
        if (dev->cmd_pool) vkDestroyCommandPool(dev->device, dev->cmd_pool, NULL);
        vkDestroyDevice(dev->device, NULL);
    }
    if (dev->instance) vkDestroyInstance(dev->instance, NULL);
    free(dev);
}

void hl_device_release_scratch(hl_device *dev) {
    hl_async_quiesce(dev);
    hl_buffer_destroy(dev, &dev->buf_a);
    hl_buffer_destroy(dev, &dev->buf_b);
    hl_buffer_destroy(dev, &dev->buf_c);
    hl_buffer_destroy(dev, &dev->buf_w);
    hl_buffer_destroy(dev, &dev->buf_bias);
    hl_buffer_destroy(dev, &dev->buf_rows);
    hl_buffer_destroy(dev, &dev->flush);
}

const hl_caps *hl_device_caps(const hl_device *dev) { return &dev->caps; }
int hl_device_coop_enabled(const hl_device *dev) { return dev->coop_enabled; }

int hl_device_coop2_enabled(const hl_device *dev) { return dev->coop2_enabled; }

uint32_t hl_device_wait_spin_us(const hl_device *dev) { return dev->wait_spin_us; }
