/* EXPERIMENT (not product): what a grid barrier inside one persistent dispatch costs
 * against a pipeline barrier between dispatches, on the 96 matrix-vector products of a
 * 24-layer d=2048 decode step (bf16 weights, 2.4 GB). pchain.comp is the kernel.
 * Usage: pchain SPV [layers] [reps] [grids...]   Prints one JSON line per run. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vulkan.h>

#define CK(x)                                                                    \
    do {                                                                         \
        VkResult r_ = (x);                                                       \
        if (r_ != VK_SUCCESS) {                                                  \
            fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, (int)r_); \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

static VkDevice dev;
static VkPhysicalDevice phys;
static VkPhysicalDeviceMemoryProperties mp;

typedef struct {
    VkBuffer b;
    VkDeviceMemory m;
    void *map;
} buf;

static buf mkbuf(VkDeviceSize size, int host) {
    buf o = {0};
    VkBufferCreateInfo bi = {VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, NULL, 0, size,
                             VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                                 VK_BUFFER_USAGE_TRANSFER_SRC_BIT,
                             VK_SHARING_MODE_EXCLUSIVE, 0, NULL};
    CK(vkCreateBuffer(dev, &bi, NULL, &o.b));
    VkMemoryRequirements rq;
    vkGetBufferMemoryRequirements(dev, o.b, &rq);
    VkMemoryPropertyFlags want = host ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
                                      : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    uint32_t t = 0;
    for (; t < mp.memoryTypeCount; t++)
        if ((rq.memoryTypeBits & (1u << t)) && (mp.memoryTypes[t].propertyFlags & want) == want) break;
    if (t == mp.memoryTypeCount) {
        fprintf(stderr, "no memory type\n");
        exit(1);
    }
    VkMemoryAllocateInfo ai = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, NULL, rq.size, t};
    CK(vkAllocateMemory(dev, &ai, NULL, &o.m));
    CK(vkBindBufferMemory(dev, o.b, o.m, 0));
    if (host) CK(vkMapMemory(dev, o.m, 0, VK_WHOLE_SIZE, 0, &o.map));
    return o;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static VkQueue q;
static VkCommandPool pool;
static VkCommandBuffer cmd;
static VkQueryPool qp;
static VkFence fence;
static VkPipelineLayout pl;
static VkDescriptorSet ds;
static VkShaderModule sm, sm_vmm;
static uint32_t subgroup;
static double ts_ns;
static buf W, X, S, ST, RB;
static uint32_t nprod, Ns[4096];

static VkPipeline pipe5(uint32_t mode, uint32_t prefetch, uint32_t sync, uint32_t unroll) {
    uint32_t vals[5] = {mode, prefetch, subgroup, sync, unroll};
    VkSpecializationMapEntry me[5] = {{0, 0, 4}, {1, 4, 4}, {2, 8, 4}, {3, 12, 4}, {4, 16, 4}};
    VkSpecializationInfo si = {5, me, sizeof vals, vals};
    VkComputePipelineCreateInfo ci = {VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    ci.stage = (VkPipelineShaderStageCreateInfo){VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, NULL, 0,
                                                 VK_SHADER_STAGE_COMPUTE_BIT, sync == 2 ? sm_vmm : sm, "main", &si};
    ci.layout = pl;
    VkPipeline p;
    CK(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &ci, NULL, &p));
    return p;
}


static void barrier(VkPipelineStageFlags src, VkPipelineStageFlags dst) {
    VkMemoryBarrier mb = {VK_STRUCTURE_TYPE_MEMORY_BARRIER, NULL, VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT};
    vkCmdPipelineBarrier(cmd, src, dst, 0, 1, &mb, 0, NULL, 0, NULL);
}

static void submit_wait(void) {
    VkSubmitInfo si = {VK_STRUCTURE_TYPE_SUBMIT_INFO, NULL, 0, NULL, NULL, 1, &cmd, 0, NULL};
    CK(vkQueueSubmit(q, 1, &si, fence));
    CK(vkWaitForFences(dev, 1, &fence, VK_TRUE, UINT64_MAX));
    CK(vkResetFences(dev, 1, &fence));
}

/* kind 0: a dispatch a product, barriers; 1: the same, no barriers; 2: one persistent
 * dispatch of grid g. first: the stage table's first product (nprod: the empty ones). */
static double run(const char *name, int kind, VkPipeline p, uint32_t g, uint32_t first, int reps, int check) {
    double *t = calloc((size_t)reps, sizeof *t);
    for (int r = -5; r < reps; r++) {
        CK(vkResetCommandBuffer(cmd, 0));
        VkCommandBufferBeginInfo bi = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        CK(vkBeginCommandBuffer(cmd, &bi));
        vkCmdResetQueryPool(cmd, qp, 0, 2);
        vkCmdFillBuffer(cmd, S.b, 0, 4096, 0);
        vkCmdFillBuffer(cmd, X.b, 0, (nprod + 1) * 8192ull * 2, 0x3F803F80u);
        barrier(VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p);
        vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, &ds, 0, NULL);
        vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qp, 0);
        if (kind == 2) {
            uint32_t pc[4] = {first, nprod, g, 0};  /* kind 2: one persistent dispatch */
            vkCmdPushConstants(cmd, pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, 16, pc);
            vkCmdDispatch(cmd, g, 1, 1);
        } else if (kind >= 100) { /* a persistent dispatch of kind - 100 products, barriers between */
            const uint32_t per = (uint32_t)kind - 100;
            for (uint32_t s = 0, d = 0; s < nprod; s += per, d++) {
                uint32_t pc[4] = {first + s, s + per <= nprod ? per : nprod - s, g, d};
                vkCmdPushConstants(cmd, pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, 16, pc);
                vkCmdDispatch(cmd, g, 1, 1);
                if (s + per < nprod) barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
            }
        } else {
            for (uint32_t s = 0; s < nprod; s++) {
                uint32_t pc[4] = {first + s, 1, 0, 0};
                const uint32_t nsg = 256 / subgroup, need = (Ns[s] + nsg - 1) / nsg;
                const uint32_t grid = g ? (g < need ? g : need) : need;
                vkCmdPushConstants(cmd, pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, 16, pc);
                vkCmdDispatch(cmd, grid ? grid : 1, 1, 1);
                if (kind == 0 && s + 1 < nprod)
                    barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT);
            }
        }
        vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, qp, 1);
        barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT);
        VkBufferCopy c = {nprod * 8192ull * 2, 0, 8192 * 2};
        vkCmdCopyBuffer(cmd, X.b, RB.b, 1, &c);
        CK(vkEndCommandBuffer(cmd));
        submit_wait();
        uint64_t ts[2];
        CK(vkGetQueryPoolResults(dev, qp, 0, 2, sizeof ts, ts, 8, VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
        if (r >= 0) t[r] = (double)(ts[1] - ts[0]) * ts_ns * 1e-6;
    }
    qsort(t, (size_t)reps, sizeof *t, cmp);
    double med = t[reps / 2];
    /* the final output region, as a checksum of bits */
    const uint16_t *o = (const uint16_t *)RB.map;
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < 8192; i++) h = (h ^ o[i]) * 1099511628211ull;
    printf("{\"run\": \"%s\", \"grid\": %u, \"ms\": %.4f, \"min\": %.4f, \"bits\": \"%016llx\", \"check\": %d}\n", name, g,
           med, t[0], (unsigned long long)h, check);
    fflush(stdout);
    free(t);
    return med;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const uint32_t layers = argc > 2 ? (uint32_t)atoi(argv[2]) : 24;
    const int reps = argc > 3 ? atoi(argv[3]) : 30;
    VkApplicationInfo app = {VK_STRUCTURE_TYPE_APPLICATION_INFO, NULL, "pchain", 1, NULL, 0, VK_API_VERSION_1_2};
    VkInstanceCreateInfo ii = {VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, NULL, 0, &app};
    VkInstance inst;
    CK(vkCreateInstance(&ii, NULL, &inst));
    uint32_t n = 8;
    VkPhysicalDevice pds[8];
    CK(vkEnumeratePhysicalDevices(inst, &n, pds));
    phys = pds[0];
    VkPhysicalDeviceSubgroupProperties sp = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceProperties2 pp = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &sp};
    vkGetPhysicalDeviceProperties2(phys, &pp);
    subgroup = sp.subgroupSize;
    ts_ns = pp.properties.limits.timestampPeriod;
    vkGetPhysicalDeviceMemoryProperties(phys, &mp);
    fprintf(stderr, "%s subgroup %u maxStorageBufferRange %u\n", pp.properties.deviceName, subgroup,
            pp.properties.limits.maxStorageBufferRange);
    uint32_t nq = 16, qf = 0;
    VkQueueFamilyProperties qfp[16];
    vkGetPhysicalDeviceQueueFamilyProperties(phys, &nq, qfp);
    for (; qf < nq; qf++)
        if (qfp[qf].queueFlags & VK_QUEUE_COMPUTE_BIT) break;
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qi = {VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, NULL, 0, qf, 1, &prio};
    VkPhysicalDeviceVulkan12Features f12 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    f12.vulkanMemoryModel = VK_TRUE;
    VkPhysicalDevice16BitStorageFeatures f16 = {VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES, &f12};
    f16.storageBuffer16BitAccess = VK_TRUE;
    VkDeviceCreateInfo di = {VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, &f16, 0, 1, &qi};
    CK(vkCreateDevice(phys, &di, NULL, &dev));
    vkGetDeviceQueue(dev, qf, 0, &q);

    /* the products: QKV, projection, up, down, a layer */
    static const uint32_t NK[4][2] = {{6144, 2048}, {2048, 2048}, {8192, 2048}, {2048, 8192}};
    nprod = 4 * layers;
    uint32_t *tab = calloc(10ull * nprod, 4);
    uint64_t off = 0;
    for (uint32_t s = 0; s < nprod; s++) {
        const uint32_t *nk = NK[s % 4];
        Ns[s] = nk[0];
        uint32_t *e = &tab[5 * s], *z = &tab[5 * (nprod + s)];
        e[0] = nk[0], e[1] = nk[1], e[2] = (uint32_t)off, e[3] = s * 8192, e[4] = (s + 1) * 8192;
        memcpy(z, e, 20);
        z[0] = 0; /* the empty chain: no columns, the barriers alone */
        off += (uint64_t)nk[0] * nk[1] / 8;
    }
    W = mkbuf(off * 16, 0);
    X = mkbuf((nprod + 1) * 8192ull * 2, 0);
    S = mkbuf(4096, 0);
    ST = mkbuf(40ull * nprod, 1);
    RB = mkbuf(2 * 8192 * 2, 1);
    memcpy(ST.map, tab, 40ull * nprod);

    VkDescriptorSetLayoutBinding b[4];
    for (int i = 0; i < 4; i++)
        b[i] = (VkDescriptorSetLayoutBinding){(uint32_t)i, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1,
                                              VK_SHADER_STAGE_COMPUTE_BIT, NULL};
    VkDescriptorSetLayoutCreateInfo dli = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, NULL, 0, 4, b};
    VkDescriptorSetLayout dl;
    CK(vkCreateDescriptorSetLayout(dev, &dli, NULL, &dl));
    VkPushConstantRange pcr = {VK_SHADER_STAGE_COMPUTE_BIT, 0, 16};
    VkPipelineLayoutCreateInfo pli = {VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, NULL, 0, 1, &dl, 1, &pcr};
    CK(vkCreatePipelineLayout(dev, &pli, NULL, &pl));
    VkDescriptorPoolSize ps = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 4};
    VkDescriptorPoolCreateInfo dpi = {VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO, NULL, 0, 1, 1, &ps};
    VkDescriptorPool dp;
    CK(vkCreateDescriptorPool(dev, &dpi, NULL, &dp));
    VkDescriptorSetAllocateInfo dai = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO, NULL, dp, 1, &dl};
    CK(vkAllocateDescriptorSets(dev, &dai, &ds));
    VkDescriptorBufferInfo dbi[4] = {{W.b, 0, VK_WHOLE_SIZE}, {X.b, 0, VK_WHOLE_SIZE}, {S.b, 0, VK_WHOLE_SIZE},
                                     {ST.b, 0, VK_WHOLE_SIZE}};
    VkWriteDescriptorSet wr[4];
    for (int i = 0; i < 4; i++)
        wr[i] = (VkWriteDescriptorSet){VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, NULL, ds, (uint32_t)i, 0, 1,
                                       VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, NULL, &dbi[i], NULL};
    vkUpdateDescriptorSets(dev, 4, wr, 0, NULL);

    for (int m = 0; m < 2; m++) {
        char path[512];
        snprintf(path, sizeof path, "%s%s", argv[1], m ? "_vmm.spv" : ".spv");
        FILE *f = fopen(path, "rb");
        if (!f) return 3;
        fseek(f, 0, SEEK_END);
        long sz = ftell(f);
        fseek(f, 0, SEEK_SET);
        uint32_t *code = malloc((size_t)sz);
        if (fread(code, 1, (size_t)sz, f) != (size_t)sz) return 3;
        fclose(f);
        VkShaderModuleCreateInfo smi = {VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, NULL, 0, (size_t)sz, code};
        CK(vkCreateShaderModule(dev, &smi, NULL, m ? &sm_vmm : &sm));
    }
    VkCommandPoolCreateInfo cpi = {VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO, NULL,
                                   VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT, qf};
    CK(vkCreateCommandPool(dev, &cpi, NULL, &pool));
    VkCommandBufferAllocateInfo cai = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, NULL, pool,
                                       VK_COMMAND_BUFFER_LEVEL_PRIMARY, 1};
    CK(vkAllocateCommandBuffers(dev, &cai, &cmd));
    VkQueryPoolCreateInfo qpi = {VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO, NULL, 0, VK_QUERY_TYPE_TIMESTAMP, 2};
    CK(vkCreateQueryPool(dev, &qpi, NULL, &qp));
    VkFenceCreateInfo fi = {VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    CK(vkCreateFence(dev, &fi, NULL, &fence));

    /* the weights: bf16 in +-[2^-7, 2^-6), hashed from their index */
    VkPipeline pfill = pipe5(2, 0, 0, 4), pwait = pipe5(0, 1, 0, 4), pwait_nopf = pipe5(0, 0, 0, 4), pnowait = pipe5(1, 1, 0, 4);
    VkPipeline pspread = pipe5(0, 1, 1, 4), prelacq = pipe5(0, 1, 2, 4), pnofence = pipe5(0, 1, 3, 4), pu8 = pipe5(0, 1, 0, 8),
               pu2 = pipe5(0, 1, 0, 2), prelacq8 = pipe5(0, 1, 2, 8);
    {
        VkCommandBufferBeginInfo bi = {VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
        CK(vkBeginCommandBuffer(cmd, &bi));
        vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pfill);
        vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pl, 0, 1, &ds, 0, NULL);
        uint32_t pc[4] = {0, 0, 0, (uint32_t)off};
        vkCmdPushConstants(cmd, pl, VK_SHADER_STAGE_COMPUTE_BIT, 0, 16, pc);
        vkCmdDispatch(cmd, 1024, 1, 1);
        CK(vkEndCommandBuffer(cmd));
        submit_wait();
    }
    run("warm", 0, pwait_nopf, 0, 0, reps, 0);
    run("barriers", 0, pwait_nopf, 0, 0, reps, 1);
    for (int a = 4; a < argc; a++) {
        const uint32_t g = (uint32_t)atoi(argv[a]);
        static const int pers[] = {96, 48, 24, 12, 8, 4, 3, 2};
        for (int v = 0; v < 2; v++) {
            VkPipeline pv = v ? prelacq8 : pwait;
            for (int i = 0; i < 8; i++) {
                if ((uint32_t)pers[i] > nprod) continue;
                char nm[64];
                snprintf(nm, sizeof nm, "%s_dispatches_of_%d", v ? "release_acquire_unroll8" : "fence_unroll4", pers[i]);
                run(nm, 100 + pers[i], pv, g, 0, reps, 1);
            }
        }
        run("persistent_no_wait", 2, pnowait, g, 0, reps, 0);
        run("persistent_no_fence", 2, pnofence, g, 0, reps, 0);
        run("grid_barriers_only", 2, pwait, g, nprod, reps, 0);
        run("grid_barriers_only_release_acquire", 2, prelacq, g, nprod, reps, 0);
    }
    run("racing", 1, pwait_nopf, 0, 0, reps, 0);
    run("barriers", 0, pwait_nopf, 0, 0, reps, 1);
    return 0;
}
